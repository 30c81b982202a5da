import { connectRedis, requireReplicas } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { createRedisRegistryStore } from "../src/store/redis-registry-store.js";
import { describeRegistryStoreContract } from "./registry-store.contract.js";

for (const target of redisTargets()) {
  // Each open() is a separate store with its own two connections, like a second process. The default store serves
  // instance lists from its read cache; the same contract holds without it.
  describeRegistryStoreContract(`${target.name}, read cache`, async () => createRedisRegistryStore(await connectRedis(target.url)), target.skip);
  describeRegistryStoreContract(`${target.name}, no read cache`, async () => createRedisRegistryStore(await connectRedis(target.url), { readCache: false }), target.skip);
}

// With gov.redis.min-replicas=1 every write but renew and sweep goes through the durable path (a pipeline with WAIT on
// its own connection). The shared Cluster has no replicas: each WAIT answers 0 after its 1 ms timeout and the write
// still succeeds (gateway/test/redis-failover-durable.test.ts tests the waiting itself).
const cluster = redisTargets().find((t) => t.name === "redis-cluster")!;
describeRegistryStoreContract(
  `${cluster.name}, writes waiting for a replica`,
  async () => {
    const client = await connectRedis(cluster.url);
    await requireReplicas(client, { minReplicas: 1, timeoutMs: 1 });
    return createRedisRegistryStore(client);
  },
  cluster.skip,
);
