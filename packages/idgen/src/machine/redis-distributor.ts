import { runDurableScript, type RedisClient } from "../redis-script.js";
import type { DistributeRequest, LeaseRequest, MachineIdDistributor, MachineState } from "./distributor.js";
import { distributeScript, guardScript, revertScript } from "./redis-scripts.js";

/** Key names of a namespace's lease set; one function so the hash-tag rule lives in one place. */
export function machineKeys(namespace: string): { itcIdx: string; adder: string; revert: string; owner: string } {
  const tag = `{${namespace}}`;
  return { itcIdx: `idgen:${tag}:itc_idx`, adder: `idgen:${tag}:adder`, revert: `idgen:${tag}:revert`, owner: `idgen:${tag}:owner` };
}

/**
 * Machine-id leases in Redis (standalone or Cluster): distribute (self → released → new → recycle stale),
 * guard (renew if still ours), revert (release for reuse, keeping the last timestamp). Each lease is held under its
 * owner token (redis-scripts.ts), so two live processes with one instance id never share a machine id.
 * Every script writes, and goes out as a durable write: with a replica policy on the client (`gov.redis.min-replicas`,
 * `requireReplicas`) it is answered only after `WAIT`, so a master's crash right after a distribution does not hand the
 * same machine id to a second process after the failover.
 */
export function redisMachineIdDistributor(client: RedisClient): MachineIdDistributor {
  return {
    type: "redis",
    async distribute(req: DistributeRequest): Promise<MachineState> {
      const k = machineKeys(req.namespace);
      const maxId = 2 ** req.machineBit - 1;
      const r = (await runDurableScript(client, distributeScript, [k.itcIdx, k.adder, k.revert, k.owner], [req.instanceId, maxId, req.safeGuardMs, req.now, req.owner])) as [number, number, string];
      return { machineId: Number(r[0]), lastTimestamp: Number(r[1]), leaseKey: String(r[2]) };
    },
    async guard(req: LeaseRequest): Promise<boolean> {
      const k = machineKeys(req.namespace);
      return Number(await runDurableScript(client, guardScript, [k.itcIdx, k.adder, k.revert, k.owner], [req.leaseKey, req.machineId, req.now, req.owner])) > 0;
    },
    async revert(req: LeaseRequest): Promise<void> {
      const k = machineKeys(req.namespace);
      await runDurableScript(client, revertScript, [k.itcIdx, k.revert, k.owner], [req.leaseKey, req.machineId, req.now, req.owner]);
    },
  };
}
