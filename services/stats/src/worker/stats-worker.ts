import { CLOCK_SKEW_ALLOWANCE_MS, outageLogFields, type Logger } from "@gov/service-kit";
import type { StatsStore } from "../stats/stats-store.js";
import type { StatMutex } from "./stat-mutex.js";
import type { PassResult } from "./stats-pass.js";

/** Seed, Limits: the statistics job's first run 1 s after start, then every 10 s. */
export const INITIAL_DELAY_MS = 1000;
export const PERIOD_MS = 10_000;

export interface StatsWorkerOptions {
  mutex: StatMutex;
  /**
   * One pass over every namespace; `signal` aborts when the mutex is lost or the worker stops. `dueAt` (epoch ms) is
   * when the pass was due: passes are due exactly one period apart, and start within a tick of it.
   */
  runPass: (signal: AbortSignal, dueAt: number) => Promise<PassResult>;
  /** Where the start of the last pass is kept (by any worker), so a new holder keeps the pace. */
  passes: Pick<StatsStore, "lastPassAt" | "setLastPassAt">;
  logger: Logger;
  initialDelayMs?: number;
  periodMs?: number;
  /** How often a worker asks for the mutex and checks whether a pass is due (default 1 s). */
  tickMs?: number;
  now?: () => number;
}

export interface StatsWorker {
  /** Resolves once no pass is running and the mutex is released. */
  stop(): Promise<void>;
}

/**
 * Runs the statistics job while this process holds the `stat` mutex. Every tick it asks for the mutex (cheap: one
 * SET NX on Redis); the holder runs a pass when one is due: `initialDelayMs` after this worker started, and
 * `periodMs` after the last pass started by any worker. Periods are thus paced cluster-wide, also across a change
 * of holder, and two passes never overlap (a pass that outlasts its period delays the next one).
 */
export function startStatsWorker(options: StatsWorkerOptions): StatsWorker {
  const now = options.now ?? Date.now;
  const initialDelayMs = options.initialDelayMs ?? INITIAL_DELAY_MS;
  const periodMs = options.periodMs ?? PERIOD_MS;
  const tickMs = options.tickMs ?? 1000;
  const { logger, mutex } = options;
  let startedAt = now();
  const stopping = new AbortController();
  /** The last pass start this worker knows of; re-read from the store whenever it (re)acquires the mutex. */
  let lastPass: number | undefined;
  let held = false;
  let timer: NodeJS.Timeout | undefined;
  let ticking: Promise<unknown> | undefined;

  const dueAt = () => Math.max(startedAt + initialDelayMs, lastPass === undefined ? -Infinity : lastPass + periodMs);

  /** One tick: returns how long to wait before the next (the holder wakes exactly when its next pass is due). */
  const tick = async (): Promise<number> => {
    if (!(await mutex.hold())) {
      held = false;
      return tickMs;
    }
    if (!held) {
      held = true;
      lastPass = await options.passes.lastPassAt();
    }
    // No pass started later than now: one "started" in this worker's future was paced by a clock running ahead (a host
    // an hour fast wrote it, then died or lost the mutex; or this host's clock was set back since), and waiting for it
    // stopped the job for that hour — no sweep, no counts — in every worker that took over. The pace goes on from now.
    // (this worker's own start too, which its first pass waits on)
    if (lastPass !== undefined && lastPass > now() + CLOCK_SKEW_ALLOWANCE_MS) {
      logger.warn({ job: "stat", lastPassAt: new Date(lastPass).toISOString() }, "the last statistics pass is recorded as started in this process's future (a clock running ahead, or set back here): pacing from now");
      lastPass = now();
    }
    if (startedAt > now() + CLOCK_SKEW_ALLOWANCE_MS) startedAt = now();
    const due = dueAt();
    if (now() < due || stopping.signal.aborted) return Math.min(tickMs, due - now());
    // Paced by when the pass was due, not when the timer fired (periods do not drift); from now when long overdue.
    const passAt = now() - due > tickMs ? now() : due;
    // (a worker suspended since hold() answered must not move the pace of the worker that took over)
    if (!mutex.holds()) return tickMs;
    lastPass = passAt;
    await options.passes.setLastPassAt(lastPass);
    const signal = AbortSignal.any([stopping.signal, mutex.lost]);
    const result = await options.runPass(signal, lastPass);
    logger.info({ job: "stat", passStartedAt: new Date(lastPass).toISOString(), ...result, complete: !signal.aborted }, "statistics pass done");
    return Math.min(tickMs, Math.max(0, dueAt() - now()));
  };

  const schedule = (delayMs: number) => {
    if (stopping.signal.aborted) return;
    timer = setTimeout(() => {
      ticking = tick().then(schedule, (err: unknown) => {
        logger.warn({ ...outageLogFields(err), job: "stat" }, `statistics pass failed: ${(err as Error).message}; the next period retries`);
        schedule(tickMs);
      });
    }, delayMs);
  };
  // the first tick at the initial delay (when it is shorter than a tick), so a lone worker starts exactly then
  schedule(Math.min(initialDelayMs, tickMs));

  return {
    async stop() {
      stopping.abort();
      clearTimeout(timer);
      await ticking;
      await mutex.release();
    },
  };
}
