export { createConfigService, type ConfigServiceDeps, type NamespaceIndexer } from "./config-service.js";
export { configModule, createConfigModule, type ConfigModuleOptions } from "./module.js";
export { configRoutes } from "./routes.js";
export { configSettings, configModuleSettings, CONFIG_PORTS, type ConfigLimits } from "./settings.js";
export { loadConfigSettings, type ConfigSettings } from "./create-config-backend.js";
export { openConfigStore, sharedConfigStore } from "./open-store.js";
export { createMemoryConfigStore } from "./store/memory-config-store.js";
export type { ConfigStore, ConfigRecord, ConfigChange } from "./store/config-store.js";
export { createRedisConfigStore } from "./store/redis-config-store.js";
