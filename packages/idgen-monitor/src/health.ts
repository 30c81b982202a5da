import type { IdGen, IdGenerator, LeaseState, TickSequencer } from "@gov/idgen";
import { distinctGenerators } from "./metrics.js";

/** A health component as the management listener shows it (structurally the service kit's HealthReport). */
export interface ComponentHealth {
  status: "UP" | "DOWN";
  details?: Record<string, unknown>;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** The lease has stopped the generators: lost (no renewal in time, or the store gave the id away) or released. */
export const leaseStopped = (s: LeaseState | undefined) => s !== undefined && (s.status === "LOST" || s.status === "REVERTED");

/**
 * The `machineId` health component (seed Area C): UP, or DOWN with the error and the time of the failed renewal while
 * the last renewal failed, or with `checking: true` while a wall-clock jump past the stop deadline is checked with the
 * store; once the lease is lost the generators have stopped, which shows as DOWN with the stop time.
 * A manual machine id has no lease and is always UP; so is a process without a machine id (segment ids only), which
 * names none.
 */
export function machineIdHealth(idgen: IdGen): ComponentHealth {
  const s = idgen.lease?.state();
  if (!s) {
    // no machine id at all (idgen.machine.enabled=false: segment ids only): nothing held, nothing to report as held
    if (!idgen.config.machine.enabled) return { status: "UP", details: { distributor: "none", namespace: idgen.config.namespace } };
    return { status: "UP", details: { distributor: "manual", machineId: idgen.config.machine.machineId, namespace: idgen.config.namespace } };
  }
  const base = { distributor: s.distributor, machineId: s.machineId, namespace: s.namespace, instanceId: s.instanceId };
  if (s.status === "UP") return { status: "UP", details: { ...base, lastRenewalAt: iso(s.lastRenewalAt), stopDeadline: iso(s.stopDeadline) } };
  if (s.status === "DOWN") {
    return { status: "DOWN", details: { ...base, error: s.lastError, failedAt: iso(s.failedAt), consecutiveFailures: s.consecutiveFailures, stopDeadline: iso(s.stopDeadline) } };
  }
  if (s.status === "CHECKING") {
    // a passing state (one renewal): no ids until the store confirms the lease after a suspend or a forward clock step
    return {
      status: "DOWN",
      details: {
        ...base,
        checking: true,
        reason: `the wall clock ran ${s.wallGapMs} ms ahead of the monotonic clock (host suspended, or a forward clock step) past the lease's stop deadline; no ids until a renewal confirms the lease`,
        checkingSince: iso(s.checkingSince),
        error: s.lastError,
        failedAt: iso(s.failedAt),
      },
    };
  }
  if (s.status === "REVERTED") return { status: "DOWN", details: { ...base, error: "the machine id was released at shutdown", stopped: true } };
  // LOST: past the deadline the stop rule fired at the deadline; before it, the store said the lease is gone
  const stoppedAt = Date.now() >= s.stopDeadline ? s.stopDeadline : (s.failedAt ?? Date.now());
  return { status: "DOWN", details: { ...base, error: s.lastError, failedAt: iso(s.failedAt), stopped: true, stoppedAt: iso(stoppedAt) } };
}

/** Liveness of a process that issues ids: DOWN once the generators stopped for good (only a restart repairs it). */
export function idgenStopped(idgen: IdGen): ComponentHealth {
  const s = idgen.lease?.state();
  if (!leaseStopped(s)) return { status: "UP" };
  return {
    status: "DOWN",
    details: { reason: `the ID generator stopped (machine id ${s!.machineId} of namespace ${s!.namespace}: ${s!.lastError ?? "lease lost"}); requests that need an id get 503 until the process is restarted` },
  };
}

/** A time-based generator's sequencer (Snowflake, composite); undefined for a segment chain. */
export const sequencerOf = (g: IdGenerator): TickSequencer | undefined => (g as { sequencer?: TickSequencer }).sequencer;

/** How far `sequencer`'s clock stands behind its last tick, when that is more than it waits out (it refuses every id). */
export function behindPastThreshold(sequencer: TickSequencer | undefined): number | undefined {
  const behind = sequencer?.behindMs?.();
  return sequencer && behind !== undefined && behind > sequencer.brokenThresholdMs ? behind : undefined;
}

/** The first time-based generator whose clock is further behind its last tick than it waits out: it refuses every id. */
function clockRefusal(idgen: IdGen): string | undefined {
  for (const [name, g] of distinctGenerators(idgen)) {
    const sequencer = sequencerOf(g);
    const behind = behindPastThreshold(sequencer);
    if (behind !== undefined) {
      return `the clock is ${behind} ms behind the last timestamp generator [${name}] issued ids in, more than the clock-backwards broken threshold (${sequencer!.brokenThresholdMs} ms): it refuses ids until the clock has caught up (a backwards clock step; NTP should slew, not step)`;
    }
  }
  return undefined;
}

/**
 * Readiness of a process that issues ids: DOWN once the generators stopped, while a wall-clock jump could not be
 * confirmed with the store, and while the clock stands further behind their last timestamp than they wait out
 * (requests that need an id get 503 meanwhile; UP again once a renewal succeeds, or the clock caught up).
 * Only the first is for liveness ({@link idgenStopped}): a restart does not fix a clock, and one restarted with a
 * manual machine id would issue again the ids of the time it is behind.
 */
export function idgenReadiness(idgen: IdGen): ComponentHealth {
  const stopped = idgenStopped(idgen);
  if (stopped.status === "DOWN") return stopped;
  const s = idgen.lease?.state();
  if (s?.status === "CHECKING" && s.failedAt !== null && s.checkingSince !== null && s.failedAt >= s.checkingSince) {
    // A check is a passing state only while its renewal is out (one round trip); once that renewal failed, ids stay
    // refused until one succeeds, retried every retry-delay — for up to the stop rule, minutes while the store is away.
    return {
      status: "DOWN",
      details: { reason: `the machine id ${s.machineId} could not be confirmed after a wall-clock jump past its stop deadline (${s.lastError}): no ids until a renewal succeeds` },
    };
  }
  const refusal = clockRefusal(idgen);
  return refusal ? { status: "DOWN", details: { reason: refusal } } : { status: "UP" };
}
