export { createConfigService, type ConfigServiceDeps } from "./config-service.js";
export { configRoutes } from "./routes.js";
export { configSettings, type ConfigLimits } from "./settings.js";
export { createConfigBackend, loadConfigSettings, type ConfigBackend, type ConfigSettings } from "./create-config-backend.js";
export { openConfigStore } from "./open-store.js";
export { createMemoryConfigStore } from "./store/memory-config-store.js";
export type { ConfigStore, ConfigRecord, ConfigChange } from "./store/config-store.js";
export { createRedisConfigStore } from "./store/redis-config-store.js";
