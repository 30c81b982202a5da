export { statsModule, createStatsModule, type StatsModuleOptions } from "./module.js";
export { statsSettings, statsModuleSettings, workerModuleSettings, STATS_PORTS, WORKER_PORTS } from "./settings.js";
export { createStatsService, type StatsServiceDeps } from "./stats/stats-service.js";
export { createMemoryStatsStore, createRedisStatsStore, type StatsStore, type NamespaceStat } from "./stats/stats-store.js";
export { workerModule, createWorkerModule } from "./worker/worker-module.js";
export { runStatsPass, type NamespaceSource, type PassResult, type StatsPassDeps } from "./worker/stats-pass.js";
export { startStatsWorker, INITIAL_DELAY_MS, PERIOD_MS, type StatsWorker } from "./worker/stats-worker.js";
export { alwaysHeldMutex, redlockMutex, type StatMutex } from "./worker/stat-mutex.js";
export type { StatsStores } from "./worker/stores.js";
