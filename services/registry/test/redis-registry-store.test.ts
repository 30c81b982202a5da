import { connectRedis } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { createRedisRegistryStore } from "../src/store/redis-registry-store.js";
import { describeRegistryStoreContract } from "./registry-store.contract.js";

for (const target of redisTargets()) {
  // Each open() is a separate store with its own two connections, like a second process.
  describeRegistryStoreContract(target.name, async () => createRedisRegistryStore(await connectRedis(target.url)), target.skip);
}
