import { randomBytes } from "node:crypto";
import { channels, publish } from "../channels.js";
import { monotonicNow, systemClock, type Clock, type MonotonicNow } from "../clock.js";
import { ClockTooManyBackwardsException, LeaseRequestTimeoutError, LeaseUnconfirmedError, MachineIdLostException, MachineIdOverflowException } from "../errors.js";
import { defaultIdGenLogger, type IdGenLogger } from "../logger.js";
import type { MachineIdDistributor } from "./distributor.js";
import type { MachineIdSource } from "./machine-id-source.js";

export interface MachineLeaseOptions {
  namespace: string;
  instanceId: string;
  machineBit: number;
  distributor: MachineIdDistributor;
  /** First renewal after this (default 1 min). */
  initialDelayMs?: number;
  /** Renewal period (default 1 min). */
  delayMs?: number;
  /** After a failed renewal, retry after this (default `min(delay, 10 s)`): the stop deadline is near. */
  retryDelayMs?: number;
  /** T: a lease not renewed for T may be recycled by others (default 5 min). */
  safeGuardMs?: number;
  /** A new owner waits out a previous owner's later timestamp up to this; beyond it distribution fails (500 ms). */
  brokenThresholdMs?: number;
  /**
   * Longest a single store request (distribute, renew) may take before it counts as failed (default
   * `min(retryDelay, 5 s)`). The lease bounds its own requests: a client without a command timeout talking to a
   * frozen store must still report `Guard Failed` at the first renewal, not stay UP until it jumps to LOST.
   */
  requestTimeoutMs?: number;
  clock?: Clock;
  monotonic?: MonotonicNow;
  logger?: IdGenLogger;
  /** Run renewals on timers (default true). Tests may drive `renew()` themselves. */
  autoRenew?: boolean;
}

/**
 * `UP` renewed fine · `DOWN` last renewal failed (still usable until the stop deadline) · `CHECKING` the wall clock
 * passed the stop deadline but the monotonic clock did not (host suspended, or a forward clock step): no ids until a
 * renewal confirms the lease is still ours · `LOST` stopped · `REVERTED` released.
 */
export type LeaseStatus = "UP" | "DOWN" | "CHECKING" | "LOST" | "REVERTED";

/** Which clock's stop deadline fired: `monotonic` (lost by the stop rule) or `wall` (a check, see `CHECKING`). */
export type StopClock = "monotonic" | "wall";

/** Everything a health indicator or metrics collector needs, as plain data. Times are epoch ms. */
export interface LeaseState {
  namespace: string;
  instanceId: string;
  machineId: number;
  distributor: string;
  status: LeaseStatus;
  lost: boolean;
  distributedAt: number;
  /** When the last successful renewal (or the distribution, before the first renewal) was sent. */
  lastRenewalAt: number;
  /** `"<ErrorName>: <message>"` of the last failed renewal, null after a success. */
  lastError: string | null;
  /** When the last failed renewal was attempted, null after a success. */
  failedAt: number | null;
  /**
   * When generators stop unless a renewal succeeds first: `lastRenewalAt + T − min(10 s, T/10)` on the wall clock
   * (then `CHECKING`), and as long after the renewal was sent on the monotonic clock (then `LOST`), whichever is first.
   */
  stopDeadline: number;
  /**
   * Which clock's stop deadline fired, null while neither did: `wall` while `CHECKING` (and when that check found the
   * lease gone), `monotonic` when the stop rule lost the lease.
   */
  stopClock: StopClock | null;
  /** While `CHECKING`: since when (epoch ms), and how far the wall clock ran ahead of the monotonic one since the last renewal. */
  checkingSince: number | null;
  wallGapMs: number | null;
  consecutiveFailures: number;
  renewals: { success: number; failure: number; lost: number };
  safeGuardMs: number;
}

/** `T − min(10 s, T/10)`: how long generation may go on without a successful renewal. */
export function stopAfterMs(safeGuardMs: number): number {
  return safeGuardMs - Math.min(10_000, safeGuardMs / 10);
}

function errorText(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

/**
 * A machine id held under lease, with its guarder. Implements {@link MachineIdSource} for generators:
 * `assertUsable()` throws `MachineIdLostException` once the lease is lost, and it stays lost until
 * `redistribute()`.
 */
export class MachineLease implements MachineIdSource {
  machineId = -1;
  version = 0;
  private readonly o: Required<MachineLeaseOptions>;
  private readonly stopAfter: number;
  /**
   * The wall deadline passing when the monotonic one is at most this far off is the ordinary stop rule (LOST), not a
   * jump to check: a wall clock slewed by NTP (≤ 500 ppm) or floored to the millisecond gets there a little earlier.
   */
  private readonly tieMs: number;
  private status: LeaseStatus = "UP";
  private distributedAt = 0;
  private lastRenewalAt = 0;
  /** Monotonic time at which the last successful request was *sent*; the stop rule counts from here. */
  private lastRenewalMono = 0;
  /**
   * The same stop rule on the wall clock: `lastRenewalAt + stopAfter`, precomputed so that the generators' per-tick
   * check is one comparison with the tick they already read. A recycled id's next owner starts strictly after the
   * previous owner's last stamp (≥ `lastRenewalAt`) plus `stopAfter`, so ticks below this deadline can never meet its
   * ids; ticks at or past it wait for a renewal that confirms the lease (`CHECKING`).
   */
  private wallDeadline = 0;
  private stopClock: StopClock | null = null;
  private checkingSince: number | null = null;
  private wallGapMs: number | null = null;
  /** A renewal that succeeded but was sent too long ago by the wall clock (suspended meanwhile): renew again at once. */
  private recheck = false;
  private lastError: string | null = null;
  private failedAt: number | null = null;
  /** When the first of the current run of failed renewals was attempted (`failedAt` is the last one's). */
  private failingSince: number | null = null;
  private consecutiveFailures = 0;
  private readonly renewals = { success: 0, failure: 0, lost: 0 };
  private timer: NodeJS.Timeout | undefined;
  private renewing: Promise<void> | undefined;
  /** The release at shutdown succeeded, or its failure was logged (by `revert()` or `abandonRelease()`). */
  private releaseSettled = false;
  /** The latest tick a generator issued ids in under this lease; a release hands the next owner a time past it. */
  private highestTick = 0;
  /**
   * This lease's owner token: the store hands the instance id's machine id back only to its owner, so that a second
   * live process with the same instance id (containers on two hosts, both `172.17.0.2:1`) gets an id of its own.
   */
  private readonly owner = randomBytes(9).toString("base64url");
  /** What the store holds the lease under: the instance id, or a key of its own when another live lease had that. */
  private leaseKey: string;

  private constructor(opts: MachineLeaseOptions) {
    const delayMs = opts.delayMs ?? 60_000;
    const retryDelayMs = opts.retryDelayMs ?? Math.min(delayMs, 10_000);
    // explicit `??` per field: an option passed as `undefined` must still get its default
    this.o = {
      namespace: opts.namespace,
      instanceId: opts.instanceId,
      machineBit: opts.machineBit,
      distributor: opts.distributor,
      initialDelayMs: opts.initialDelayMs ?? 60_000,
      delayMs,
      retryDelayMs,
      safeGuardMs: opts.safeGuardMs ?? 300_000,
      brokenThresholdMs: opts.brokenThresholdMs ?? 500,
      requestTimeoutMs: opts.requestTimeoutMs ?? Math.min(retryDelayMs, 5_000),
      clock: opts.clock ?? systemClock,
      monotonic: opts.monotonic ?? monotonicNow,
      logger: opts.logger ?? defaultIdGenLogger(),
      autoRenew: opts.autoRenew ?? true,
    };
    this.stopAfter = stopAfterMs(this.o.safeGuardMs);
    this.tieMs = Math.min(1_000, this.stopAfter / 100);
    this.leaseKey = opts.instanceId;
  }

  /** Distributes a machine id (waiting out a previous owner's later clock) and starts the guarder. */
  static async acquire(opts: MachineLeaseOptions): Promise<MachineLease> {
    const lease = new MachineLease(opts);
    await lease.distribute();
    lease.schedule(lease.o.initialDelayMs);
    return lease;
  }

  get namespace(): string {
    return this.o.namespace;
  }

  get instanceId(): string {
    return this.o.instanceId;
  }

  /**
   * Throws `MachineIdLostException` once the lease is lost, `LeaseUnconfirmedError` (retriable) while a wall-clock
   * jump past the stop deadline is being checked with the store. `tick` is the generator's wall-clock tick: the wall
   * half of the stop rule compares it with a precomputed deadline (without it, the lease reads its clock).
   */
  assertUsable(tick?: number): void {
    if (this.status === "LOST" || this.status === "REVERTED") throw this.lostError();
    const monoElapsed = this.o.monotonic() - this.lastRenewalMono;
    if (monoElapsed >= this.stopAfter) this.stopRuleFired("monotonic");
    if (this.status === "CHECKING") throw this.unconfirmedError();
    const wallNow = tick ?? this.o.clock.now();
    if (wallNow >= this.wallDeadline) {
      // both clocks agree (a wall clock slewed or floored to the ms reaches the deadline a little earlier): the
      // ordinary stop rule, not a jump
      if (this.stopAfter - monoElapsed <= this.tieMs) this.stopRuleFired("wall");
      // The monotonic clock stands still while the host is suspended; the store's clock (Redis TIME) does not, and
      // may have recycled the id meanwhile. A backward wall step only moves wallNow away from the deadline: the
      // monotonic rule above still bounds the lease.
      this.startCheck(wallNow, monoElapsed);
      throw this.unconfirmedError();
    }
    if (tick !== undefined && tick > this.highestTick) this.highestTick = tick;
  }

  /** The stop rule: no successful renewal for `stopAfter`, by `clock`. The lease is lost. */
  private stopRuleFired(clock: StopClock): never {
    this.stopClock = clock;
    this.markLost(`no successful renewal for ${this.stopAfter} ms (safe-guard duration ${this.o.safeGuardMs} ms)`);
    throw this.lostError();
  }

  /**
   * While `CHECKING`: the outstanding renewal that will settle it (never rejects), for `nextIdAsync` to wait on;
   * undefined otherwise, or when no renewal is out (the last one failed; the next is scheduled after `retryDelayMs`).
   */
  confirmation(): Promise<void> | undefined {
    return this.status === "CHECKING" ? this.renewing : undefined;
  }

  /** Plain, current state (also flips to CHECKING or LOST when a stop deadline has passed). */
  state(): LeaseState {
    if (this.status === "UP" || this.status === "DOWN" || this.status === "CHECKING") {
      try {
        this.assertUsable();
      } catch {
        // state reflects the loss; callers of state() never get the exception
      }
    }
    return {
      namespace: this.o.namespace,
      instanceId: this.o.instanceId,
      machineId: this.machineId,
      distributor: this.o.distributor.type,
      status: this.status,
      lost: this.status === "LOST",
      distributedAt: this.distributedAt,
      lastRenewalAt: this.lastRenewalAt,
      lastError: this.lastError,
      failedAt: this.failedAt,
      stopDeadline: this.wallDeadline,
      stopClock: this.stopClock,
      checkingSince: this.checkingSince,
      wallGapMs: this.wallGapMs,
      consecutiveFailures: this.consecutiveFailures,
      renewals: { ...this.renewals },
      safeGuardMs: this.o.safeGuardMs,
    };
  }

  /** One renewal now. Never throws; the outcome is in `state()`. Concurrent calls share one request. */
  renew(): Promise<void> {
    this.renewing ??= this.doRenew().finally(() => {
      this.renewing = undefined;
      if (this.recheck) {
        this.recheck = false;
        if (this.status === "CHECKING") void this.renew();
      }
    });
    return this.renewing;
  }

  /** After a loss: get a (possibly different) machine id and resume renewals. */
  async redistribute(): Promise<void> {
    this.clearTimer();
    await this.distribute();
    this.schedule(this.o.delayMs);
  }

  /** Stops renewals and releases the id. Never throws: a failure logs ERROR `Revert machine id of [...] failed`. */
  async revert(): Promise<void> {
    this.clearTimer();
    if (this.status === "REVERTED") return;
    const wasLost = this.status === "LOST";
    this.status = "REVERTED";
    if (wasLost) return; // not ours any more: releasing it could free an id another instance now holds
    const { namespace, instanceId } = this.o;
    try {
      // bounded like every request of the lease: a shutdown waits on this, and with a frozen store (a client without a
      // command timeout) it waited until the process gave up on it, without the ERROR that says the id was not released
      await this.bounded("release", this.o.distributor.revert({ namespace, instanceId, leaseKey: this.leaseKey, owner: this.owner, machineId: this.machineId, now: this.lastUsedAt() }));
      this.o.logger.debug({ namespace, instanceId, machineId: this.machineId }, "Reverted machine id");
      this.emit("reverted");
    } catch (err) {
      if (!this.releaseSettled) this.revertFailed(err);
    } finally {
      this.releaseSettled = true;
    }
  }

  /**
   * The caller stops waiting for the release (its shutdown gave up on a store that does not answer, perhaps before
   * `revert()` was even called): the id is not released, so log it now — once; a release still out is not reported
   * again. Nothing when the release settled, or when the lease was lost (nothing of ours to release).
   */
  abandonRelease(reason: string): void {
    if (this.releaseSettled || this.status === "LOST") return;
    this.releaseSettled = true;
    this.revertFailed(new Error(reason));
  }

  private revertFailed(err: unknown): void {
    const { namespace, instanceId } = this.o;
    this.o.logger.error({ namespace, instanceId, machineId: this.machineId, error: errorText(err) }, `Revert machine id of [${instanceId}] failed`);
    this.emit("revert-failed", err);
  }

  private async distribute(): Promise<void> {
    const { namespace, instanceId, machineBit, safeGuardMs, distributor, clock, logger } = this.o;
    const sentMono = this.o.monotonic();
    const sentWall = clock.now();
    const st = await this.bounded("distribution", distributor.distribute({ namespace, instanceId, machineBit, safeGuardMs, now: Math.max(clock.now(), this.highestTick), owner: this.owner, maxWaitMs: this.o.brokenThresholdMs }));
    const leaseKey = st.leaseKey ?? instanceId;
    if (st.machineId < 0 || st.machineId > 2 ** machineBit - 1) {
      throw new MachineIdOverflowException(`InstanceId:[${instanceId}] - distribution failed - totalMachineIds:[${2 ** machineBit}] in namespace [${namespace}]`);
    }
    const backwards = st.lastTimestamp - clock.now();
    if (backwards > 0) {
      // the previous owner of this id used timestamps ahead of our clock: wait, or refuse to start
      logger.warn({ namespace, instanceId, machineId: st.machineId, backwardsMs: backwards, lastTimestamp: st.lastTimestamp }, "Detected clock backwards");
      publish(channels.clockBackwards, () => ({ name: `${namespace}:machine`, backwardsMs: backwards, lastTimestamp: st.lastTimestamp, action: backwards > this.o.brokenThresholdMs ? "broken" : "sleep" }));
      if (backwards > this.o.brokenThresholdMs) {
        await distributor.revert({ namespace, instanceId, leaseKey, owner: this.owner, machineId: st.machineId, now: st.lastTimestamp }).catch(() => {});
        throw new ClockTooManyBackwardsException(backwards, this.o.brokenThresholdMs, st.lastTimestamp);
      }
    }
    await this.waitPast(st.lastTimestamp);
    if (st.machineId !== this.machineId) this.version++;
    this.machineId = st.machineId;
    if (leaseKey !== instanceId && leaseKey !== this.leaseKey) {
      logger.warn(
        { namespace, instanceId, leaseKey, machineId: st.machineId },
        `Instance id [${instanceId}] is held by a live lease of another process: this one leases machine id ${st.machineId} under [${leaseKey}]; give every process an instance id of its own (idgen.machine.instance-id), or ignore this after a restart within the safe-guard duration`,
      );
    }
    this.leaseKey = leaseKey;
    this.status = "UP";
    this.distributedAt = clock.now();
    this.setBaselines(sentWall, sentMono);
    this.lastError = null;
    this.failedAt = null;
    this.consecutiveFailures = 0;
    logger.debug({ namespace, instanceId, machineId: st.machineId, lastTimestamp: st.lastTimestamp, distributor: distributor.type }, "Distributed machine id");
    this.emit("distributed");
  }

  /**
   * Returns once the clock shows a tick strictly after `lastTimestamp`, the last tick the previous owner of the id may
   * have used: issuing in that very tick (same host, same millisecond) would repeat its ids. Re-reads the clock after
   * every wait because timers may fire early and clocks may step.
   */
  private async waitPast(lastTimestamp: number): Promise<void> {
    for (let now = this.o.clock.now(); now <= lastTimestamp; now = this.o.clock.now()) {
      await new Promise((r) => setTimeout(r, lastTimestamp - now + 1));
    }
  }

  /** The time a release or renewal records as this owner's last: past every tick a generator used. */
  private lastUsedAt(): number {
    return Math.max(this.o.clock.now(), this.highestTick);
  }

  /** `request`, or a rejection once it has taken `requestTimeoutMs` (its late outcome is ignored). */
  private bounded<T>(what: string, request: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new LeaseRequestTimeoutError(`machine id ${what} got no answer from the ${this.o.distributor.type} store within ${this.o.requestTimeoutMs} ms`)), this.o.requestTimeoutMs);
    });
    request.catch(() => {}); // a late failure of an abandoned request must not surface as an unhandled rejection
    return Promise.race([request, timeout]).finally(() => clearTimeout(timer));
  }

  private async doRenew(): Promise<void> {
    if (this.status === "LOST" || this.status === "REVERTED") return;
    const { namespace, instanceId, clock, logger } = this.o;
    const sentMono = this.o.monotonic();
    const attemptAt = clock.now();
    try {
      const ours = await this.bounded("renewal", this.o.distributor.guard({ namespace, instanceId, leaseKey: this.leaseKey, owner: this.owner, machineId: this.machineId, now: Math.max(attemptAt, this.highestTick), safeGuardMs: this.o.safeGuardMs }));
      if (this.stopped()) return; // lost (stop rule) or reverted while this renewal was out
      if (!ours) {
        this.renewals.lost++;
        const err = this.lostError();
        this.recordFailure(attemptAt, err);
        this.markLost("the store no longer holds this lease (recycled, reverted or lost)");
        return;
      }
      if (this.o.monotonic() - this.lastRenewalMono >= this.stopAfter) {
        // too late: generators already stopped; a stopped lease stays lost until redistribute()
        this.assertUsableQuietly();
        return;
      }
      const wallNow = clock.now();
      if (wallNow - attemptAt >= this.stopAfter) {
        // The wall clock passed this request's own stop deadline while it was out (the host was suspended meanwhile):
        // the answer may predate a recycling of the id, so it confirms nothing. Ask again at once.
        if (this.status !== "CHECKING") this.startCheck(wallNow, this.o.monotonic() - this.lastRenewalMono);
        this.recheck = true;
        return;
      }
      const checked = this.status === "CHECKING" ? this.wallGapMs : null;
      this.renewals.success++;
      this.status = "UP";
      this.setBaselines(attemptAt, sentMono);
      if (checked !== null) {
        logger.info({ namespace, instanceId, machineId: this.machineId, wallGapMs: checked }, "Machine id confirmed after the wall-clock jump; ids resume");
        this.emit("confirmed");
      }
      // after `Guard Failed`, the operator also needs to read that it is over
      if (this.consecutiveFailures > 0) logger.info({ namespace, instanceId, machineId: this.machineId, failures: this.consecutiveFailures, failedSince: this.failingSince }, "Renewed machine id again after failed renewals");
      this.lastError = null;
      this.failedAt = null;
      this.consecutiveFailures = 0;
      logger.debug({ namespace, instanceId, machineId: this.machineId }, "Renewed machine id");
      this.emit("renewed");
    } catch (err) {
      // Lost (the stop deadline passed) or released while this renewal was out: its failure changes nothing, and
      // recording it would turn LOST back into DOWN, to be lost — and logged — a second time.
      const now: string = this.status; // changed while this renewal was awaited (narrowing does not see that)
      if (now === "LOST" || now === "REVERTED") return;
      this.renewals.failure++;
      this.recordFailure(attemptAt, err);
      this.assertUsableQuietly();
    } finally {
      if (this.status === "UP") this.schedule(this.o.delayMs);
      else if (this.status === "DOWN" || this.status === "CHECKING") this.schedule(this.o.retryDelayMs);
    }
  }

  /** The last successful request was sent at these times: both clocks' stop rules count from here. */
  private setBaselines(sentWall: number, sentMono: number): void {
    this.lastRenewalAt = sentWall;
    this.wallDeadline = sentWall + this.stopAfter;
    this.lastRenewalMono = sentMono;
    this.stopClock = null;
    this.checkingSince = null;
    this.wallGapMs = null;
  }

  /**
   * Only the wall clock says the stop deadline passed: the host was suspended (the monotonic clock stood still) or the
   * wall clock stepped forward. Ids wait (`CHECKING`) for a renewal sent now: if the store still holds the lease, it
   * resets both baselines and ids resume (a forward step costs one round trip); if not, the lease is LOST.
   */
  private startCheck(wallNow: number, monoElapsed: number): void {
    const { namespace, instanceId, logger } = this.o;
    const wallElapsed = wallNow - this.lastRenewalAt;
    const gap = Math.round(wallElapsed - monoElapsed);
    this.status = "CHECKING";
    this.stopClock = "wall";
    this.checkingSince = this.o.clock.now();
    this.wallGapMs = gap;
    logger.warn(
      { namespace, instanceId, machineId: this.machineId, wallGapMs: gap, wallElapsedMs: Math.round(wallElapsed), monotonicElapsedMs: Math.round(monoElapsed), stopAfterMs: this.stopAfter },
      `Wall clock ran ${gap} ms ahead of the monotonic clock since the last renewal (host suspended, or a forward clock step): machine id ${this.machineId} issues no ids until a renewal confirms the lease is still ours`,
    );
    this.emit("checking");
    void this.renew(); // joins a renewal already out; one sent before the jump is answered by a fresh one (recheck)
  }

  /** Lost or released (a method, so that a check after an await is not narrowed away by one before it). */
  private stopped(): boolean {
    return this.status === "LOST" || this.status === "REVERTED";
  }

  private recordFailure(at: number, err: unknown): void {
    const { namespace, instanceId } = this.o;
    if (this.status !== "CHECKING") this.status = "DOWN"; // a check stays a check: ids wait until a renewal succeeds
    this.lastError = errorText(err);
    this.failedAt = at;
    if (this.consecutiveFailures === 0) this.failingSince = at;
    this.consecutiveFailures++;
    // the error's type and message, not its stack: a store that cannot be reached is expected here, and the stack would
    // only show the Redis client's internals, once per renewal for the whole outage
    this.o.logger.error({ namespace, instanceId, machineId: this.machineId, error: errorText(err) }, "Guard Failed");
    this.emit("failed", err);
  }

  private assertUsableQuietly(): void {
    try {
      this.assertUsable();
    } catch {
      // the loss is recorded in status
    }
  }

  private markLost(reason: string): void {
    if (this.status === "LOST") return;
    this.status = "LOST";
    this.lastError ??= `MachineIdLostException: ${reason}`;
    this.failedAt ??= this.o.clock.now();
    this.clearTimer();
    this.o.logger.error({ namespace: this.o.namespace, instanceId: this.o.instanceId, machineId: this.machineId, reason }, "Machine id lost; Snowflake generators stopped");
    this.emit("lost", reason);
  }

  private unconfirmedError(): LeaseUnconfirmedError {
    return new LeaseUnconfirmedError(
      `The machine id [${this.machineId}] bound to the instance [${this.o.instanceId}]@[${this.o.namespace}] is being re-confirmed with the ${this.o.distributor.type} store: the wall clock ran ${this.wallGapMs} ms ahead of the monotonic clock (host suspended, or a forward clock step) and passed the lease's stop deadline; retry shortly`,
    );
  }

  private lostError(): MachineIdLostException {
    return new MachineIdLostException(
      `The machine id [${this.machineId}] bound to the instance [${this.o.instanceId}]@[${this.o.namespace}] has been lost`,
    );
  }

  private schedule(ms: number): void {
    this.clearTimer();
    if (!this.o.autoRenew) return;
    this.timer = setTimeout(() => void this.renew(), ms);
    this.timer.unref(); // a lease must not keep the process alive
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private emit(event: string, error?: unknown): void {
    publish(channels.guard, () => ({
      namespace: this.o.namespace,
      instanceId: this.o.instanceId,
      machineId: this.machineId,
      event,
      error: error === undefined ? undefined : errorText(error),
      at: this.o.clock.now(),
    }));
  }
}
