import { connectRedis } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { createRedisRegistryStore } from "../src/store/redis-registry-store.js";
import { describeRegistryStoreContract } from "./registry-store.contract.js";

for (const target of redisTargets()) {
  // Each open() is a separate store with its own two connections, like a second process. The default store serves
  // instance lists from its read cache; the same contract holds without it.
  describeRegistryStoreContract(`${target.name}, read cache`, async () => createRedisRegistryStore(await connectRedis(target.url)), target.skip);
  describeRegistryStoreContract(`${target.name}, no read cache`, async () => createRedisRegistryStore(await connectRedis(target.url), { readCache: false }), target.skip);
}
