import { runDurableScript, UnderReplicatedWriteError, type RedisClient } from "../redis-script.js";
import type { DistributeRequest, LeaseRequest, MachineIdDistributor, MachineState } from "./distributor.js";
import { distributeScript, guardScript, revertScript } from "./redis-scripts.js";

/** Key names of a namespace's lease set; one function so the hash-tag rule lives in one place. */
export function machineKeys(namespace: string): { itcIdx: string; adder: string; revert: string; owner: string; guard: string } {
  const tag = `{${namespace}}`;
  return { itcIdx: `idgen:${tag}:itc_idx`, adder: `idgen:${tag}:adder`, revert: `idgen:${tag}:revert`, owner: `idgen:${tag}:owner`, guard: `idgen:${tag}:guard` };
}

/** The safe-guard duration as the scripts keep it for a lease: whole milliseconds (a guarder switched off passes a fractional "forever"). */
const wholeMs = (ms: number) => String(Math.floor(ms));

/** The distribute script's answer: machine id, the last timestamp its previous owner used, the lease key. */
function stateOf(reply: unknown): Required<MachineState> {
  const [machineId, lastTimestamp, leaseKey] = reply as [number, number, string];
  return { machineId: Number(machineId), lastTimestamp: Number(lastTimestamp), leaseKey: String(leaseKey) };
}

/**
 * Machine-id leases in Redis (standalone or Cluster): distribute (self → released → new → recycle stale),
 * guard (renew if still ours), revert (release for reuse, keeping the last timestamp). Each lease is held under its
 * owner token (redis-scripts.ts), so two live processes with one instance id never share a machine id.
 * Every script writes, and goes out as a durable write: with a replica policy on the client (`gov.redis.min-replicas`,
 * `requireReplicas`) it is answered only after `WAIT`, so a master's crash right after a distribution does not hand the
 * same machine id to a second process after the failover. A distribution that `WAIT` saw on fewer replicas fails
 * (UnderReplicatedWriteError) rather than succeeds — a lease the new master may not have would be handed to another
 * process while this one issues ids under it — and is released again on the master, best effort, before it is
 * reported. Renewals of a lease already held still succeed (counted, like every under-replicated write): the new
 * master still holds the lease from its last replicated renewal, within its safe-guard duration, and the next renewal
 * extends it there; failing them instead would stop every process's ids one stop rule after a failover, while the
 * promoted master has no replica. A release (revert) lost at a failover leaves a lease that expires by itself.
 */
export function redisMachineIdDistributor(client: RedisClient): MachineIdDistributor {
  const revert = async (req: LeaseRequest): Promise<void> => {
    const k = machineKeys(req.namespace);
    await runDurableScript(client, revertScript, [k.itcIdx, k.revert, k.owner, k.guard], [req.leaseKey, req.machineId, req.now, req.owner]);
  };
  return {
    type: "redis",
    async distribute(req: DistributeRequest): Promise<MachineState> {
      const k = machineKeys(req.namespace);
      const maxId = 2 ** req.machineBit - 1;
      try {
        return stateOf(await runDurableScript(client, distributeScript, [k.itcIdx, k.adder, k.revert, k.owner, k.guard], [req.instanceId, maxId, wholeMs(req.safeGuardMs), req.now, req.owner, req.maxWaitMs ?? 0], { failUnderReplicated: true }));
      } catch (err) {
        if (err instanceof UnderReplicatedWriteError) {
          const st = stateOf(err.reply);
          await revert({ namespace: req.namespace, instanceId: req.instanceId, leaseKey: st.leaseKey, owner: req.owner, machineId: st.machineId, now: st.lastTimestamp }).catch(() => {});
          // what was refused, for the operator reading why the process did not start
          throw new UnderReplicatedWriteError(`machine id ${st.machineId} of namespace "${req.namespace}" for instance "${req.instanceId}": ${err.message}`, err.reply);
        }
        throw err;
      }
    },
    async guard(req: LeaseRequest): Promise<boolean> {
      const k = machineKeys(req.namespace);
      return Number(await runDurableScript(client, guardScript, [k.itcIdx, k.adder, k.revert, k.owner, k.guard], [req.leaseKey, req.machineId, req.now, req.owner, wholeMs(req.safeGuardMs ?? 0)])) > 0;
    },
    revert,
  };
}
