import { mkdir, open, readFile, rename } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { DistributeRequest, LeaseRequest, MachineIdDistributor } from "./distributor.js";

/**
 * `manual` with a state file (`idgen.machine.state-storage.local.state-location`, as CosId's local machine-state
 * storage): the configured id, and the last timestamp this host used it at, kept in a file across restarts. Without
 * it a process that starts again with its clock stepped back (an NTP correction, a VM restored from a snapshot) issues
 * again the ids of the period it steps back into; with it, the new run waits until its clock is past the recorded
 * time, or refuses to start when that is further off than `idgen.machine.clock-backwards.broken-threshold`.
 *
 * The time is recorded when the id is taken, at every renewal (`idgen.machine.guarder.delay`) and at shutdown: a
 * process killed without a shutdown leaves the time of its last renewal, so a backward step smaller than the time
 * between that renewal and the kill is not seen. A file that cannot be written is a failed renewal (`Guard Failed`).
 * Two processes with the same id and folder share one file: as without it, giving them the same id is on you.
 */
export function localStateDistributor(machineId: number, stateLocation: string): MachineIdDistributor {
  let recorded = 0;
  // one write at a time, each of the latest time: a renewal and the release may overlap
  let writing: Promise<void> = Promise.resolve();
  const record = (namespace: string, now: number): Promise<void> => {
    recorded = Math.max(recorded, now);
    const write = writing.then(() => writeState(stateFile(stateLocation, namespace, machineId), { namespace, machineId, lastTimestamp: recorded }));
    writing = write.catch(() => {});
    return write;
  };
  return {
    type: "manual",
    async distribute(req: DistributeRequest) {
      const lastTimestamp = await readLastTimestamp(stateLocation, req.namespace, machineId);
      // The run starts now: recorded before any id is issued, so a kill before the first renewal still leaves it.
      // (The lease waits past `lastTimestamp` before it issues anything.)
      await record(req.namespace, Math.max(lastTimestamp, req.now));
      return { machineId, lastTimestamp };
    },
    async guard(req: LeaseRequest) {
      await record(req.namespace, req.now);
      return true;
    },
    async revert(req: LeaseRequest) {
      await record(req.namespace, req.now);
    },
  };
}

interface MachineStateFile {
  namespace: string;
  machineId: number;
  lastTimestamp: number;
}

/** One file per namespace and machine id: `<namespace, base64url>.<machine id>.json` (any namespace is a safe name). */
export function stateFile(stateLocation: string, namespace: string, machineId: number): string {
  return join(stateLocation, `${Buffer.from(namespace).toString("base64url")}.${machineId}.json`);
}

async function readLastTimestamp(stateLocation: string, namespace: string, machineId: number): Promise<number> {
  const path = stateFile(stateLocation, namespace, machineId);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0; // first run with this id here
    throw new Error(`cannot read the machine state file ${path} (idgen.machine.state-storage.local.state-location): ${(err as Error).message}`, { cause: err });
  }
  let state: Partial<MachineStateFile> | undefined;
  try {
    state = JSON.parse(text) as Partial<MachineStateFile>;
  } catch {
    // (a write is a rename of a complete file, so this is not a half-written one)
  }
  const last = state?.lastTimestamp;
  if (typeof last !== "number" || !Number.isSafeInteger(last) || last < 0) {
    // Starting as if it were absent could issue the recorded period's ids again: the operator decides.
    throw new Error(
      `the machine state file ${path} holds no last timestamp (${JSON.stringify(text.slice(0, 80))}): delete it only if this host's clock has not been set back since it was written`,
    );
  }
  return last;
}

/** Replaces the file whole (write a temporary one, flush it, rename): a crash leaves the old state or the new. */
async function writeState(path: string, state: MachineStateFile): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.tmp`;
  const file = await open(temporary, "w");
  try {
    await file.writeFile(`${JSON.stringify(state)}\n`);
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(temporary, path);
}
