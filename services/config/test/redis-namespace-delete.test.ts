// The Redis side of a namespace delete: the script refuses ids that are no longer what the index holds (a concurrent
// write), and a namespace of more keys than one DEL chunk goes whole.
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectRedis, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import type { ConfigStore } from "../src/store/config-store.js";
import { createRedisConfigStore } from "../src/store/redis-config-store.js";
import { configDataKeys, configKeys, configScripts, eventChannel } from "../src/store/redis-config-scripts.js";
import { freshNamespace } from "./config-store.contract.js";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`config namespace delete on ${target.name}`, () => {
    let store: ConfigStore;
    let raw: RedisClient;
    beforeAll(async () => {
      [store, raw] = await Promise.all([createRedisConfigStore(await connectRedis(target.url), { maxVersions: 5 }), connectRedis(target.url)]);
    });
    afterAll(async () => Promise.all([store?.close(), raw?.quit()]));

    it("the script does nothing and answers -1 when the config ids it was given are stale", async () => {
      const ns = freshNamespace();
      await store.set(ns, "a", "1", sha("1"), 1);
      await store.set(ns, "b", "1", sha("1"), 1); // written after the caller's read of ["a"]
      const [idx, , , , , removed] = configKeys(ns, "");
      const scripts = configScripts(raw);
      expect(await scripts.deleteNamespace([idx, removed, ...configDataKeys(ns, "a")], eventChannel(ns), ["a"], [])).toBe(-1);
      expect(await store.list(ns)).toEqual(["a", "b"]);
      expect(await scripts.deleteNamespace([idx, removed, ...configDataKeys(ns, "a"), ...configDataKeys(ns, "b")], eventChannel(ns), ["a", "b"], [])).toBe(2);
      expect(await store.list(ns)).toEqual([]);
    });

    it("a namespace with more keys than one DEL chunk (1,000) is deleted whole", async () => {
      const ns = freshNamespace();
      await Promise.all(Array.from({ length: 300 }, (_, i) => store.set(ns, `c${i}`, "v1", sha("v1"), 1).then(() => store.set(ns, `c${i}`, "v2", sha("v2"), 2))));
      await Promise.all(Array.from({ length: 50 }, (_, i) => store.remove(ns, `c${i}`, 3)));
      expect(await store.count(ns)).toBe(250);
      expect(await store.deleteNamespace(ns)).toBe(250);
      const left = await Promise.all([...configKeys(ns, "c0"), ...configKeys(ns, "c299")].map((k) => raw.exists(k)));
      expect(left).toEqual(left.map(() => 0));
    });
  });
}
