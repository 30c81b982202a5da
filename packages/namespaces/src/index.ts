export { type NamespaceIndex, SystemNamespaceError } from "./namespace-index.js";
export { createMemoryNamespaceIndex } from "./memory-namespace-index.js";
export { createRedisNamespaceIndex, indexKeys, type RedisNamespaceIndexOptions } from "./redis-namespace-index.js";
export { openNamespaceIndex, sharedNamespaceIndex, indexSettings, type IndexSettings } from "./open-index.js";
export { namespaceSettings, DEFAULT_SYSTEM_NAMESPACE } from "./settings.js";
