/**
 * Where a Snowflake or composite generator gets its machine id. A fixed number for `manual`, or a
 * {@link MachineLease} that can be lost. Generators call `assertUsable()` once per tick (cheap) and re-read
 * `machineId` when `version` changes (after a re-distribution).
 */
export interface MachineIdSource {
  readonly machineId: number;
  /** Bumped whenever `machineId` changes. */
  readonly version: number;
  /** Throws `MachineIdLostException` when the lease may no longer be ours. */
  assertUsable(): void;
}

/** A machine id that never changes and never gets lost (`manual` distributor). */
export function fixedMachineId(machineId: number): MachineIdSource {
  return { machineId, version: 0, assertUsable() {} };
}
