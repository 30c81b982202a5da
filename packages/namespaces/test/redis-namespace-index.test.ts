import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectRedis, type RedisClient } from "@gov/redis";
import { redisServerPath, redisTargets, startRedis } from "@gov/testkit";
import type { NamespaceIndex } from "../src/namespace-index.js";
import { createRedisNamespaceIndex, indexKeys } from "../src/redis-namespace-index.js";
import { describeNamespaceIndexContract, fresh } from "./namespace-index.contract.js";

for (const target of redisTargets()) {
  // Each open() has its own connections, like another process.
  const open = async (system: string) => createRedisNamespaceIndex(await connectRedis(target.url), { system });
  describeNamespaceIndexContract(target.name, open, target.skip);

  describe.skipIf(target.skip)(`Redis namespace index on ${target.name}`, () => {
    let system: string;
    let a: NamespaceIndex;
    let b: NamespaceIndex;
    let raw: RedisClient; // changes the index behind the indexes' backs (no event)
    beforeAll(async () => {
      system = fresh("gov");
      [a, b, raw] = await Promise.all([open(system), open(system), connectRedis(target.url)]);
    });
    afterAll(async () => Promise.all([a?.close(), b?.close(), raw?.quit()]));

    it("a known namespace costs no round trip: add is answered from the cache", async () => {
      const ns = fresh();
      await a.add(ns);
      await raw.srem(indexKeys(system).index, ns); // removed without an announcement: a cannot know
      await a.add(ns);
      expect(await b.has(ns)).toBe(false);
    });

    it("a removal by another process reaches the cache: the next add indexes the namespace again", async () => {
      const ns = fresh();
      await a.add(ns);
      expect(await b.remove(ns)).toBe(true);
      await expect.poll(async () => (await a.add(ns), b.has(ns)), { timeout: 3000, interval: 10 }).toBe(true);
    });

    it("the system namespace stays listed and counted if the index is lost (Redis restarted without persistence)", async () => {
      const lost = fresh("gov");
      const index = await open(lost);
      try {
        await index.add(fresh());
        await raw.del(indexKeys(lost).index);
        expect(await index.list()).toEqual([lost]);
        expect(await index.count()).toBe(1);
      } finally {
        await index.close();
      }
    });

    it("the index keys share the system namespace's slot", async () => {
      const { index, current } = indexKeys("gov-{system}");
      if (target.name === "redis-cluster") expect(await raw.call("CLUSTER", "KEYSLOT", index)).toBe(await raw.call("CLUSTER", "KEYSLOT", current));
      expect([index, current].every((k) => k.startsWith("gov-{system}:"))).toBe(true);
    });
  });
}

describe.skipIf(!redisServerPath())("Redis namespace index while Redis is stopped", () => {
  it("a write refused because Redis is down says nothing was written (a register's first write is the index's)", async () => {
    const redis = await startRedis();
    const index = await createRedisNamespaceIndex(await connectRedis(redis.url), { system: fresh("gov") });
    try {
      await redis.stop();
      await expect(index.add(fresh())).rejects.toThrow(/is unavailable \(.+\): nothing was written; retry when it is back$/);
    } finally {
      await redis.start();
      await index.close();
      await redis.stop();
    }
  }, 30_000);
});
