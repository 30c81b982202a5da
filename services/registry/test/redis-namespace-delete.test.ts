// The Redis side of a namespace delete: without force each part refuses once a service exists (one created meanwhile
// survives), and a namespace of tens of thousands of services goes whole, in parts.
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

    it("without force a part refuses ({-1, 0}, nothing done) once a service exists; with force it deletes", async () => {
      const ns = freshNamespace();
      const now = Date.now();
      await store.register(ns, instance("a", "h", 1, {}, now), now);
      await store.putService(ns, "b");
      const scripts = registryScripts(raw);
      expect(await scripts.deleteNamespacePart(namespaceKeys(ns, []), eventChannel(ns), true, [])).toEqual([-1, 0]);
      expect(await store.listServices(ns)).toEqual(["a", "b"]);
      expect(await scripts.deleteNamespacePart(namespaceKeys(ns, ["a", "b"]), eventChannel(ns), false, ["a", "b"])).toEqual([2, 1]);
      expect(await store.listServices(ns)).toEqual([]);
    });

    it("a namespace of 20,000 services is deleted whole, in parts", { timeout: 60_000 }, async () => {
      const ns = freshNamespace();
      const n = 20_000;
      const now = Date.now();
      for (let i = 0; i < n; i += 2000) await Promise.all(Array.from({ length: 2000 }, (_, j) => store.putService(ns, `s${i + j}`)));
      await store.register(ns, instance("s0", "h", 1, {}, now), now);
      expect(await store.deleteNamespace(ns)).toEqual({ services: n, instances: 1 });
      expect(await store.listServices(ns)).toEqual([]);
      expect(await raw.exists(...namespaceKeys(ns, ["s0", `s${n - 1}`]))).toBe(0);
    });
  });
}
