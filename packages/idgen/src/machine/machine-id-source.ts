/**
 * Where a Snowflake or composite generator gets its machine id. A fixed number for `manual`, or a
 * {@link MachineLease} that can be lost. Generators call `assertUsable()` once per tick (cheap) and re-read
 * `machineId` when `version` changes (after a re-distribution).
 */
export interface MachineIdSource {
  readonly machineId: number;
  /** Bumped whenever `machineId` changes. */
  readonly version: number;
  /**
   * Throws `MachineIdLostException` when the lease may no longer be ours, `LeaseUnconfirmedError` (retriable) while
   * that is being checked with the store. Generators call it once per tick with the
   * tick (epoch ms) they are about to issue ids in, so that a release can hand the next owner a time strictly
   * past every tick this owner used — even a tick ahead of the wall clock (clock-backwards spin, sequence overflow).
   */
  assertUsable(tick?: number): void;
  /**
   * After `assertUsable` threw `LeaseUnconfirmedError`: the outstanding renewal that settles the check (never
   * rejects), for async callers to wait on before they retry; undefined when there is none to wait for.
   */
  confirmation?(): Promise<void> | undefined;
}

/** A machine id that never changes and never gets lost (`manual` distributor). */
export function fixedMachineId(machineId: number): MachineIdSource {
  return { machineId, version: 0, assertUsable() {} };
}
