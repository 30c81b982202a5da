import { checkNamespace, type SharedRedis } from "@gov/service-kit";
import { connectRedis, parseRedisUrl } from "@gov/redis";
import { SettingsError } from "@gov/settings";
import { createMemorySecurityStore } from "./store/memory-security-store.js";
import { createRedisSecurityStore } from "./store/redis-security-store.js";
import type { SecurityStore } from "./store/security-store.js";

/** Redis when REDIS_URL is set, else the embedded store; everything in the system namespace (contract §2). */
export async function openSecurityStore(settings: { redisUrl?: string; systemNamespace: string }, shared?: SharedRedis): Promise<SecurityStore> {
  try {
    checkNamespace(settings.systemNamespace, { requireHashTag: true });
  } catch (err) {
    throw new SettingsError(`setting gov.namespace.system is invalid: ${(err as Error).message}`);
  }
  if (!settings.redisUrl) return createMemorySecurityStore();
  const kind = shared?.kind ?? (parseRedisUrl(settings.redisUrl).kind === "cluster" ? "redis-cluster" : "redis");
  if (shared) return createRedisSecurityStore(shared.client, { namespace: settings.systemNamespace, kind, hub: shared.hub });
  return createRedisSecurityStore(await connectRedis(settings.redisUrl), { namespace: settings.systemNamespace, kind });
}
