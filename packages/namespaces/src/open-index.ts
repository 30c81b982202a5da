import { connectRedis } from "@gov/redis";
import { sharedRedisOf, sharedSettings, type ModuleContext, type SharedRedis } from "@gov/service-kit";
import { loadSettings } from "@gov/settings";
import { createMemoryNamespaceIndex } from "./memory-namespace-index.js";
import type { NamespaceIndex } from "./namespace-index.js";
import { createRedisNamespaceIndex } from "./redis-namespace-index.js";
import { namespaceSettings } from "./settings.js";

export interface IndexSettings {
  redisUrl?: string;
  systemNamespace: string;
}

/** Redis when REDIS_URL is set (on the process's client when `shared` is given), else the embedded index. */
export async function openNamespaceIndex(settings: IndexSettings, shared?: SharedRedis): Promise<NamespaceIndex> {
  if (!settings.redisUrl) return createMemoryNamespaceIndex(settings.systemNamespace);
  if (shared) return createRedisNamespaceIndex(shared.client, { system: settings.systemNamespace, kind: shared.kind, hub: shared.hub });
  return createRedisNamespaceIndex(await connectRedis(settings.redisUrl), { system: settings.systemNamespace });
}

/** The settings the index reads, from the process's sources (any module may be the first to open it). */
export const indexSettings = { redisUrl: sharedSettings.redisUrl, ...namespaceSettings };

/**
 * The process's one namespace index (every module of a process gets the same instance; the process closes it). On the
 * embedded store this is what makes a config written by the config module visible to the namespace service.
 */
export function sharedNamespaceIndex(ctx: ModuleContext): Promise<NamespaceIndex> {
  return ctx.shared("gov.namespace-index", () => openNamespaceIndex(loadSettings(indexSettings, ctx.sources), sharedRedisOf(ctx)));
}
