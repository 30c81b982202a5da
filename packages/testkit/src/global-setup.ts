import type { TestProject } from "vitest/node";
import { redisServerPath, startRedis, startRedisCluster } from "./redis-servers.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** `redis://…` of a shared standalone server, or "" when Redis suites are skipped. */
    redisUrl: string;
    /** `redis-cluster://…` of a shared 3-master cluster, or "". */
    redisClusterUrl: string;
    /** Why Redis suites are skipped ("" when they run). */
    redisSkipReason: string;
  }
}

/**
 * Starts one standalone Redis and one 3-master Redis Cluster for the whole test run, on free loopback
 * ports, and stops them by PID at the end. Without `redis-server` the Redis suites are skipped with the
 * reason — except under CI=true, where a missing server fails the run.
 */
export default async function setup(project: TestProject) {
  if (!redisServerPath()) {
    const reason = "redis-server is not installed (apt-get install -y redis-server)";
    if (process.env.CI === "true") throw new Error(`CI=true but ${reason}`);
    project.provide("redisUrl", "");
    project.provide("redisClusterUrl", "");
    project.provide("redisSkipReason", reason);
    console.warn(`[testkit] Redis suites skipped: ${reason}`);
    return;
  }
  const [standalone, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
  project.provide("redisUrl", standalone.url);
  project.provide("redisClusterUrl", cluster.url);
  project.provide("redisSkipReason", "");
  return async () => {
    await Promise.all([standalone.stop(), cluster.stop()]);
  };
}
