import { NamespaceService } from "@gov/api/gen/gov/stats/v1/namespace_pb";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import { storeBackedInstance, type LocalService, type ModuleContext, type ModuleInstance, type ServiceModule } from "@gov/service-kit";
import type { SettingValues } from "@gov/settings";
import { namespaceServiceFor } from "./namespaces/namespace-module.js";
import { STATS_PORTS, statsModuleSettings, type workerModuleSettings } from "./settings.js";
import { createStatsService } from "./stats/stats-service.js";
import { runWorker, type WorkerTiming } from "./worker/run-worker.js";
import { sharedStatsStores, type StatsStores } from "./worker/stores.js";

/** Stats requests are a namespace in a path: small. */
export const MAX_STATS_MESSAGE_BYTES = 64 * 1024;

export interface StatsModuleOptions {
  /** Stores opened by the caller (tests); default: the process's shared stores (ctx.shared). */
  stores?: StatsStores;
  /** Worker timing (tests), or false for no worker in this process. */
  worker?: WorkerTiming | false;
  /** The clock of the reads (tests); Date.now by default. */
  now?: () => number;
}

/** The statistics job of a module instance, its readiness following the process's Redis; closing stops the job. */
export function workerInstance(ctx: ModuleContext, settings: SettingValues<typeof workerModuleSettings>, stores: StatsStores, options: Pick<StatsModuleOptions, "stores" | "worker">, impls: ModuleInstance["impls"]): ModuleInstance {
  const worker = options.worker === false ? undefined : runWorker(ctx, settings, stores, options.worker);
  // The stores are the process's (closed by it): closing this instance stops the job and releases the mutex.
  return storeBackedInstance({ impls, store: { kind: stores.registry.kind, close: async () => worker?.stop() }, redis: options.stores ? undefined : ctx.redis, redisUrl: settings.redisUrl });
}

/**
 * The stats service as a module of a process: namespace stat and topology reads, and the statistics job (which only
 * works while this process holds the `stat` mutex). `gov.stats-service.*` decides whether it runs here.
 */
export function createStatsModule(options: StatsModuleOptions = {}): ServiceModule<typeof statsModuleSettings> {
  return {
    name: "stats",
    services: [StatsService, NamespaceService],
    settings: statsModuleSettings,
    ports: STATS_PORTS,
    limits: () => ({ maxRequestBytes: MAX_STATS_MESSAGE_BYTES }),
    async create(ctx) {
      const { settings } = ctx;
      const stores = options.stores ?? (await sharedStatsStores(ctx));
      const impl = createStatsService({ stats: stores.stats, topology: stores.topology, registry: stores.registry, namespaces: stores.namespaces, namespaceRule: { requireHashTag: settings.requireHashTag }, edgeTtlMs: settings.edgeTtl, now: options.now });
      const impls: LocalService[] = [{ service: StatsService, impl }];
      impls.push(await namespaceServiceFor(ctx, settings, stores.stats));
      return workerInstance(ctx, settings, stores, options, impls);
    },
  };
}

/** The stats module as `npm start` runs it. */
export const statsModule = createStatsModule();
