/** A machine id and the last timestamp its previous owner used (the new owner must not issue ids before it). */
export interface MachineState {
  machineId: number;
  lastTimestamp: number;
}

export interface DistributeRequest {
  namespace: string;
  instanceId: string;
  machineBit: number;
  /** Leases not renewed for this long may be recycled by this claimant. */
  safeGuardMs: number;
  /** The caller's clock, stored as the owner's last timestamp. */
  now: number;
}

export interface LeaseRequest {
  namespace: string;
  instanceId: string;
  machineId: number;
  /** The owner's clock; kept as the id's last timestamp for the next owner's clock check. */
  now: number;
}

/**
 * Hands out machine ids. `guard` answers false when the lease is no longer ours (recycled, reverted, lost in
 * the store); it throws when the store cannot be reached. `revert` releases the id for reuse.
 */
export interface MachineIdDistributor {
  readonly type: string;
  distribute(req: DistributeRequest): Promise<MachineState>;
  guard(req: LeaseRequest): Promise<boolean>;
  revert(req: LeaseRequest): Promise<void>;
}

/**
 * `manual`: one configured id; nothing to renew. Running two processes with the same id is on you. A release is
 * remembered in the process, so that a lease re-acquired here right after a revert still starts after the last tick
 * the released lease recorded.
 */
export function manualDistributor(machineId: number): MachineIdDistributor {
  let releasedAt = 0;
  return {
    type: "manual",
    distribute: async () => ({ machineId, lastTimestamp: releasedAt }),
    guard: async () => true,
    revert: async (req) => {
      releasedAt = Math.max(releasedAt, req.now);
    },
  };
}
