import type { ConfigStore } from "@gov/config-service";
import { openConfigStore } from "@gov/config-service";
import { openRegistryStore, sharedTopologyStore, type RegistryStore, type TopologyStore } from "@gov/registry-service";
import { sharedRedisOf, type ModuleContext } from "@gov/service-kit";
import { createMemoryStatsStore, createRedisStatsStore, type StatsStore } from "../stats/stats-store.js";
import type { workerModuleSettings } from "../settings.js";
import type { SettingValues } from "@gov/settings";
import type { NamespaceSource } from "./stats-pass.js";

/** What the stats service and its worker read and write. Tests inject them; processes share them (ctx.shared). */
export interface StatsStores {
  registry: RegistryStore;
  configs: ConfigStore;
  topology: TopologyStore;
  stats: StatsStore;
  namespaces: NamespaceSource;
}

const SYSTEM_NAMESPACE = "gov-{system}";

type WorkerSettings = SettingValues<typeof workerModuleSettings>;

/** The process's stores: the same instances the config and registry modules use, so the embedded store is shared too. */
export async function sharedStatsStores(ctx: ModuleContext, settings: WorkerSettings): Promise<StatsStores> {
  const shared = sharedRedisOf(ctx);
  const registry = await ctx.shared("registry.store", () => openRegistryStore(settings, shared));
  const configs = await ctx.shared("config.store", () => openConfigStore({ ...settings, maxVersions: 100 }, shared));
  const stats = await ctx.shared("stats.store", async () =>
    ctx.redis && registry.kind !== "embedded" ? createRedisStatsStore(ctx.redis, SYSTEM_NAMESPACE, registry.kind) : createMemoryStatsStore(),
  );
  return { registry, configs, stats, topology: await sharedTopologyStore(ctx, registry), namespaces: { list: async () => [], current: async () => SYSTEM_NAMESPACE } };
}
