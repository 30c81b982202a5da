import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { sharedNamespaceIndex } from "@gov/namespaces";
import { outageLogFields, storeBackedInstance, type ModuleContext, type ServiceModule } from "@gov/service-kit";
import { sharedRegistryStore } from "./open-store.js";
import { createRegistryService } from "./registry-service.js";
import { REGISTRY_PORTS, registryModuleSettings } from "./settings.js";
import type { RegistryStore } from "./store/registry-store.js";
import { createMemoryTopologyStore, createRedisTopologyStore, createTopologyRecorder, type TopologyStore } from "./topology.js";

/** The largest registry request: 256 metadata entries of 4 KiB fit well below it. */
export const MAX_REGISTRY_MESSAGE_BYTES = 1024 * 1024;

export interface RegistryModuleOptions {
  /** A store opened by the caller (tests), which the process then owns; default: from REDIS_URL, on the process's Redis client. */
  store?: RegistryStore;
  /** The clock of the service (tests); Date.now by default. */
  now?: () => number;
  /** Where discovery edges go (tests); default: beside the registry store (the same Redis, or in memory). */
  topology?: TopologyStore;
}

/**
 * The process's one topology store (`ModuleContext.shared`), beside the registry store: on the process's Redis when
 * there is one, else in memory, so the registry module that records edges and the stats module that reads them share it.
 */
export function sharedTopologyStore(ctx: ModuleContext, store: RegistryStore): Promise<TopologyStore> {
  return ctx.shared("registry.topology", async () =>
    ctx.redis && store.kind !== "embedded" ? createRedisTopologyStore(ctx.redis) : createMemoryTopologyStore(async (ns, serviceId) => (await store.listServices(ns)).includes(serviceId)),
  );
}

/**
 * The registry service as a module of a process (see `runProcess` in `@gov/service-kit`): `gov.registry-service.*`
 * decides whether it runs in the process or is called at its URL.
 */
export function createRegistryModule(options: RegistryModuleOptions = {}): ServiceModule<typeof registryModuleSettings> {
  return {
    name: "registry",
    services: [RegistryService],
    settings: registryModuleSettings,
    ports: REGISTRY_PORTS,
    // Registry messages are small (an instance with its metadata); the listeners refuse larger ones before reading them.
    limits: () => ({ maxRequestBytes: MAX_REGISTRY_MESSAGE_BYTES }),
    async create(ctx) {
      const { settings } = ctx;
      // The process's store and namespace index, shared with the other modules of the process (which close them).
      const store = await sharedRegistryStore(ctx, options.store);
      const namespaces = await sharedNamespaceIndex(ctx);
      const namespaceRule = { requireHashTag: settings.requireHashTag };
      const now = options.now ?? Date.now;
      const topologyStore = options.topology ?? (await sharedTopologyStore(ctx, store));
      const topology = createTopologyRecorder({
        store: topologyStore,
        namespaceRule,
        now,
        // asked only when a discovery found no instance (off the request's path): does the producer exist at all?
        serviceExists: async (ns, serviceId) => (await store.listServices(ns)).includes(serviceId),
        onError: (err) => ctx.logger.warn(outageLogFields(err), "a topology edge could not be recorded"),
      });
      const impl = createRegistryService({ store, namespaces, namespaceRule, instanceTtlMs: settings.instanceTtl, now, topology });
      // an injected store (tests) is not the process's Redis: its health is not ours to report
      return storeBackedInstance({
        impls: [{ service: RegistryService, impl }],
        store: { kind: store.kind, close: async () => {} },
        redis: options.store ? undefined : ctx.redis,
        redisUrl: settings.redisUrl,
      });
    },
  };
}

/** The registry module as `npm start` runs it. */
export const registryModule = createRegistryModule();
