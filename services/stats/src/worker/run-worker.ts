import type { ModuleContext } from "@gov/service-kit";
import type { SettingValues } from "@gov/settings";
import type { workerModuleSettings } from "../settings.js";
import { alwaysHeldMutex, redlockMutex } from "./stat-mutex.js";
import { runStatsPass } from "./stats-pass.js";
import { startStatsWorker, type StatsWorker } from "./stats-worker.js";
import type { StatsStores } from "./stores.js";

/** Test seams of the worker: shorter periods, a clock. */
export interface WorkerTiming {
  initialDelayMs?: number;
  periodMs?: number;
  tickMs?: number;
  /** How long the `stat` lock outlives a dead holder (default 5 s). */
  mutexTtlMs?: number;
  now?: () => number;
}

/**
 * Starts the statistics job of a process (the stats module's, or a lone worker's): on Redis with
 * `mutex.redis.enabled`, only while this process holds the `stat` mutex; otherwise every period.
 */
export function runWorker(ctx: ModuleContext, settings: SettingValues<typeof workerModuleSettings>, stores: StatsStores, timing: WorkerTiming = {}): StatsWorker {
  const now = timing.now ?? Date.now;
  const distributed = !!ctx.redis && stores.registry.kind !== "embedded" && settings.mutexEnabled;
  const mutex = distributed ? redlockMutex(ctx.redis!, { key: `${stores.system}:mutex:stat`, ttlMs: timing.mutexTtlMs, logger: ctx.logger }) : alwaysHeldMutex();
  if (!distributed) ctx.logger.info({ mutex: "stat", distributed }, settings.mutexEnabled ? "statistics job runs in this process (embedded store: the stat mutex is trivially held)" : "statistics job runs in this process every period (mutex.redis.enabled=false: run one worker only)");
  return startStatsWorker({
    mutex,
    passes: stores.stats,
    logger: ctx.logger,
    ...timing,
    runPass: (signal, passAt) => runStatsPass({ ...stores, edgeTtlMs: settings.edgeTtl, now, signal, mayWrite: () => mutex.holds(), passAt }),
  });
}
