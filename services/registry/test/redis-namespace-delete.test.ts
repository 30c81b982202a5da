// The Redis side of a namespace delete: the script refuses service ids that are no longer what the index holds.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectRedis, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { createRedisRegistryStore } from "../src/store/redis-registry-store.js";
import { eventChannel, namespaceKeys, registryScripts } from "../src/store/redis-registry-scripts.js";
import type { RegistryStore } from "../src/store/registry-store.js";
import { freshNamespace, instance } from "./registry-store.contract.js";

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`registry namespace delete on ${target.name}`, () => {
    let store: RegistryStore;
    let raw: RedisClient;
    beforeAll(async () => {
      [store, raw] = await Promise.all([createRedisRegistryStore(await connectRedis(target.url)), connectRedis(target.url)]);
    });
    afterAll(async () => Promise.all([store?.close(), raw?.quit()]));

    it("the script does nothing and answers -1 when the service ids it was given are stale", async () => {
      const ns = freshNamespace();
      const now = Date.now();
      await store.register(ns, instance("a", "h", 1, {}, now), now);
      await store.putService(ns, "b"); // created after the caller's read of ["a"]
      const scripts = registryScripts(raw);
      expect(await scripts.deleteNamespace(namespaceKeys(ns, ["a"]), eventChannel(ns), ["a"])).toEqual([-1, 0]);
      expect(await store.listServices(ns)).toEqual(["a", "b"]);
      expect(await scripts.deleteNamespace(namespaceKeys(ns, ["a", "b"]), eventChannel(ns), ["a", "b"])).toEqual([2, 1]);
      expect(await store.listServices(ns)).toEqual([]);
    });
  });
}
