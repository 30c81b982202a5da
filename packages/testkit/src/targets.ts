import { inject } from "vitest";

export type RedisTargetName = "redis" | "redis-cluster";

/**
 * The Redis targets a contract suite runs against: the shared standalone server and the shared cluster.
 * Each entry has `skip` set (with the reason) when Redis is unavailable, so suites report as skipped.
 */
export function redisTargets(): { name: RedisTargetName; url: string; skip: string }[] {
  const reason = inject("redisSkipReason");
  return [
    { name: "redis", url: inject("redisUrl"), skip: reason },
    { name: "redis-cluster", url: inject("redisClusterUrl"), skip: reason },
  ];
}
