export { createRegistryService, toInstance, type RegistryServiceDeps } from "./registry-service.js";
export { registryModule, createRegistryModule, sharedTopologyStore, type RegistryModuleOptions } from "./module.js";
export {
  createMemoryTopologyStore,
  createRedisTopologyStore,
  createTopologyRecorder,
  CONSUMER_HEADER,
  CONSUMER_NAMESPACE_HEADER,
  EDGE_WRITE_INTERVAL_MS,
  UNKNOWN_CONSUMER_RETRY_MS,
  MAX_EDGES_PER_NAMESPACE,
  type TopologyStore,
  type TopologyEdge,
  type TopologyRecorder,
} from "./topology.js";
export { registrySettings, registryModuleSettings, REGISTRY_PORTS } from "./settings.js";
export { openRegistryStore, sharedRegistryStore } from "./open-store.js";
export { chooseWeighted } from "./choose-instance.js";
export { watchInstances, type InstanceWatchEvent } from "./watch-instances.js";
export { createMemoryRegistryStore } from "./store/memory-registry-store.js";
export { createRedisRegistryStore } from "./store/redis-registry-store.js";
export type { RegistryStore, InstanceRecord, RegistryChange, RegistryOp } from "./store/registry-store.js";
