// The Redis side of a namespace delete: without force each part refuses once a config has a current version (one
// written meanwhile survives), and a namespace of tens of thousands of configs goes whole, in parts.
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
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

    it("without force a part refuses (-1, nothing done) once a config has a current version; with force it deletes", async () => {
      const ns = freshNamespace();
      await store.set(ns, "gone", "1", sha("1"), 1);
      await store.remove(ns, "gone", 2); // only its history is left
      await store.set(ns, "b", "1", sha("1"), 3); // written after the caller read an empty index
      const [idx, , , , , removed] = configKeys(ns, "");
      const scripts = configScripts(raw);
      expect(await scripts.deleteNamespacePart([idx, removed, ...configDataKeys(ns, "gone")], eventChannel(ns), true, ["gone"])).toBe(-1);
      expect(await raw.exists(configKeys(ns, "gone")[3])).toBe(1); // the history of "gone" is untouched
      expect(await store.list(ns)).toEqual(["b"]);
      expect(await scripts.deleteNamespacePart([idx, removed, ...configDataKeys(ns, "gone"), ...configDataKeys(ns, "b")], eventChannel(ns), false, ["gone", "b"])).toBe(1);
      expect(await store.list(ns)).toEqual([]);
      expect(await raw.exists(configKeys(ns, "gone")[3], idx, removed)).toBe(0);
    });

    it("a namespace of 20,000 configs is deleted whole, in parts, and announced config by config", { timeout: 60_000 }, async () => {
      const ns = freshNamespace();
      const n = 20_000;
      // written straight into Redis (what 20,000 PUTs leave), in pipelines: the test is the delete, not the writes
      for (let i = 0; i < n; i += 2000) {
        const batch = raw.pipeline();
        for (let j = i; j < i + 2000; j++) {
          const [idx, cfg] = configKeys(ns, `c${j}`);
          batch.sadd(idx, `c${j}`).hset(cfg, { configId: `c${j}`, data: "v", hash: sha("v"), version: 1, createTime: 1 });
        }
        await batch.exec();
      }
      const seen = new Set<string>();
      const unsubscribe = store.subscribe((c) => c.namespace === ns && c.op === "remove" && seen.add(c.configId));
      try {
        expect(await store.count(ns)).toBe(n);
        expect(await store.deleteNamespace(ns)).toBe(n);
        expect(await store.count(ns)).toBe(0);
        expect(await raw.exists(configKeys(ns, "c0")[1], configKeys(ns, `c${n - 1}`)[1])).toBe(0);
        await vi.waitFor(() => expect(seen.size).toBe(n), { timeout: 20_000 });
      } finally {
        unsubscribe();
      }
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
