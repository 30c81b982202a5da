import type { SharedRedis } from "@gov/service-kit";
import { connectRedis, parseRedisUrl } from "@gov/redis";
import { SettingsError } from "@gov/settings";
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
