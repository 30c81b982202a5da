export { statsModule, createStatsModule, type StatsModuleOptions } from "./module.js";
export { statsSettings, statsModuleSettings, workerModuleSettings, STATS_PORTS, WORKER_PORTS } from "./settings.js";
