import { sharedConfigStore, type ConfigStore } from "@gov/config-service";
import { sharedNamespaceIndex } from "@gov/namespaces";
import { sharedRegistryStore, sharedTopologyStore, type RegistryStore, type TopologyStore } from "@gov/registry-service";
import type { ModuleContext } from "@gov/service-kit";
import { createMemoryStatsStore, createRedisStatsStore, type StatsStore } from "../stats/stats-store.js";
import type { NamespaceSource } from "./stats-pass.js";

/** What the stats service and its worker read and write. Tests inject them; processes share them (ctx.shared). */
export interface StatsStores {
  registry: RegistryStore;
  configs: ConfigStore;
  topology: TopologyStore;
  stats: StatsStore;
  namespaces: NamespaceSource;
  /** The system namespace (gov.namespace.system): where the `stat` mutex and the last pass time live. */
  system: string;
}

/** The process's stores: the same instances the config and registry modules use, so the embedded store is shared too. */
export async function sharedStatsStores(ctx: ModuleContext): Promise<StatsStores> {
  const [registry, configs, namespaces] = await Promise.all([sharedRegistryStore(ctx), sharedConfigStore(ctx), sharedNamespaceIndex(ctx)]);
  const stats = await ctx.shared("gov.stats-store", async () =>
    ctx.redis && registry.kind !== "embedded" ? createRedisStatsStore(ctx.redis, namespaces.system, registry.kind) : createMemoryStatsStore(),
  );
  return { registry, configs, stats, namespaces, system: namespaces.system, topology: await sharedTopologyStore(ctx, registry) };
}
