import { sharedRedisOf, type ModuleContext, type SharedRedis } from "@gov/service-kit";
import { connectRedis, parseRedisUrl } from "@gov/redis";
import { loadSettings, SettingsError } from "@gov/settings";
import { registryModuleSettings } from "./settings.js";
import { createMemoryRegistryStore } from "./store/memory-registry-store.js";
import { createRedisRegistryStore } from "./store/redis-registry-store.js";
import type { RegistryStore } from "./store/registry-store.js";

export interface StoreSettings {
  redisUrl?: string;
  requireHashTag: boolean;
}


/** Redis when REDIS_URL is set, else the embedded store (contract §1), as the config service does. */
export async function openRegistryStore(settings: StoreSettings, shared?: SharedRedis): Promise<RegistryStore> {
  if (!settings.redisUrl) return createMemoryRegistryStore();
  const kind = shared?.kind ?? (parseRedisUrl(settings.redisUrl).kind === "cluster" ? "redis-cluster" : "redis");
  if (kind === "redis-cluster" && !settings.requireHashTag) {
    throw new SettingsError(
      "setting gov.namespace.require-hash-tag=false cannot be used with a Redis Cluster: namespaces without a {tag} would spread over slots",
    );
  }
  if (shared) return createRedisRegistryStore(shared.client, { kind, hub: shared.hub });
  return createRedisRegistryStore(await connectRedis(settings.redisUrl), { kind });
}

/**
 * The process's one registry store: every module of a process (registry, namespace and stats services, the worker)
 * gets the same instance, so they see the same data also on the embedded store. The process closes it. `injected`
 * (tests) becomes that store when the registry module is the first to ask.
 */
export function sharedRegistryStore(ctx: ModuleContext, injected?: RegistryStore): Promise<RegistryStore> {
  const { redisUrl, requireHashTag } = registryModuleSettings;
  return ctx.shared("gov.registry-store", async () => injected ?? openRegistryStore(loadSettings({ redisUrl, requireHashTag }, ctx.sources), sharedRedisOf(ctx)));
}
