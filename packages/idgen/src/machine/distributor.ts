/** A machine id and the last timestamp its previous owner used (the new owner must not issue ids before it). */
export interface MachineState {
  machineId: number;
  lastTimestamp: number;
  /**
   * What the lease is held under, for its renewals and release: the instance id, unless another live lease already
   * held that instance id (then a key of this lease's own). Default: the instance id.
   */
  leaseKey?: string;
}

export interface DistributeRequest {
  namespace: string;
  instanceId: string;
  machineBit: number;
  /** Leases not renewed for this long may be recycled by this claimant. */
  safeGuardMs: number;
  /** The caller's clock, stored as the owner's last timestamp. */
  now: number;
  /**
   * The lease's owner token (random, one per lease object): the instance id's entry is this lease's own only if it
   * carries this token, so a second live process with the same instance id is not handed the same machine id.
   */
  owner: string;
  /**
   * How far ahead of `now` a released id's last timestamp may be for this caller to take it (it waits that long before
   * issuing; further ahead it would refuse to start): such an id is passed over for one it can use. Default 0.
   */
  maxWaitMs?: number;
}

export interface LeaseRequest {
  namespace: string;
  instanceId: string;
  /** What the distribution answered the lease is held under (`MachineState.leaseKey`, else the instance id). */
  leaseKey: string;
  /** The lease's owner token, as distributed. */
  owner: string;
  machineId: number;
  /** The owner's clock; kept as the id's last timestamp for the next owner's clock check. */
  now: number;
  /**
   * The holder's safe-guard duration, kept with the lease: a claimant recycles the lease only once it has not been
   * renewed for the longer of this and its own (processes of one namespace may be configured differently).
   */
  safeGuardMs?: number;
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
