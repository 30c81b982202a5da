import { sharedRedisOf, type ModuleContext, type SharedRedis } from "@gov/service-kit";
import { connectRedis, parseRedisUrl } from "@gov/redis";
import { loadSettings, SettingsError } from "@gov/settings";
import { configModuleSettings } from "./settings.js";
import type { ConfigStore } from "./store/config-store.js";
import { createMemoryConfigStore } from "./store/memory-config-store.js";
import { createRedisConfigStore } from "./store/redis-config-store.js";

export interface StoreSettings {
  redisUrl?: string;
  requireHashTag: boolean;
  maxVersions: number;
}

const { redisUrl, requireHashTag, maxVersions } = configModuleSettings;
/** What opening the store reads, from the process's sources (any module of the process may be the first to open it). */
const storeSettings = { redisUrl, requireHashTag, maxVersions };

/**
 * The process's one config store: every module of a process (the config service, the namespace and stats services)
 * gets the same instance, so they see the same data also on the embedded store. The process closes it. `injected`
 * (tests) becomes that store when the config module is the first to ask, as it is in the module lists.
 */
export function sharedConfigStore(ctx: ModuleContext, injected?: ConfigStore): Promise<ConfigStore> {
  return ctx.shared("gov.config-store", async () => injected ?? openConfigStore(loadSettings(storeSettings, ctx.sources), sharedRedisOf(ctx)));
}

/**
 * Redis when REDIS_URL is set, else the embedded store (contract §1). With `shared`, the store uses the process's
 * client; without, it opens (and owns) one of its own.
 */
export async function openConfigStore(settings: StoreSettings, shared?: SharedRedis): Promise<ConfigStore> {
  if (!settings.redisUrl) return createMemoryConfigStore({ maxVersions: settings.maxVersions });
  const kind = shared?.kind ?? (parseRedisUrl(settings.redisUrl).kind === "cluster" ? "redis-cluster" : "redis");
  if (kind === "redis-cluster" && !settings.requireHashTag) {
    throw new SettingsError(
      "setting gov.namespace.require-hash-tag=false cannot be used with a Redis Cluster: namespaces without a {tag} would spread over slots",
    );
  }
  if (shared) return createRedisConfigStore(shared.client, { maxVersions: settings.maxVersions, kind, hub: shared.hub });
  return createRedisConfigStore(await connectRedis(settings.redisUrl), { maxVersions: settings.maxVersions, kind });
}
