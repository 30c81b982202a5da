import { connectRedis, requireReplicas } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { createRedisConfigStore } from "../src/store/redis-config-store.js";
import { describeConfigStoreContract } from "./config-store.contract.js";

// The same contract with gov.redis.min-replicas=1: every write goes through the durable path (a pipeline with WAIT on
// its own connection). The shared Cluster has no replicas, so each WAIT answers 0 after its 1 ms timeout and the write
// still succeeds; packages/redis and gateway/test/redis-failover-durable.test.ts test the waiting itself.
const cluster = redisTargets().find((t) => t.name === "redis-cluster")!;
const open = async () => {
  const client = await connectRedis(cluster.url);
  await requireReplicas(client, { minReplicas: 1, timeoutMs: 1 });
  return createRedisConfigStore(client, { maxVersions: 5 });
};
describeConfigStoreContract(`${cluster.name}, writes waiting for a replica`, open, cluster.skip);
