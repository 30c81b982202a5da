import { connectRedis, parseRedisUrl } from "@gov/redis";
import { SettingsError } from "@gov/settings";
import type { ConfigStore } from "./store/config-store.js";
import { createMemoryConfigStore } from "./store/memory-config-store.js";
import { createRedisConfigStore } from "./store/redis-config-store.js";

export interface StoreSettings {
  redisUrl?: string;
  requireHashTag: boolean;
  maxVersions: number;
}

/** Redis when REDIS_URL is set, else the embedded store (contract §1). */
export async function openConfigStore(settings: StoreSettings): Promise<ConfigStore> {
  if (!settings.redisUrl) return createMemoryConfigStore({ maxVersions: settings.maxVersions });
  const target = parseRedisUrl(settings.redisUrl);
  if (target.kind === "cluster" && !settings.requireHashTag) {
    throw new SettingsError(
      "setting gov.namespace.require-hash-tag=false cannot be used with a Redis Cluster: namespaces without a {tag} would spread over slots",
    );
  }
  const client = await connectRedis(settings.redisUrl);
  return createRedisConfigStore(client, { maxVersions: settings.maxVersions, kind: target.kind === "cluster" ? "redis-cluster" : "redis" });
}
