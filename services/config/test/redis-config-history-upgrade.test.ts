import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectRedis, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import type { ConfigStore } from "../src/store/config-store.js";
import { createRedisConfigStore } from "../src/store/redis-config-store.js";
import { configKeys } from "../src/store/redis-config-scripts.js";
import { freshNamespace } from "./config-store.contract.js";

/**
 * Upgrading from the release whose history index was a sorted set (`<ns>:cfg_htr_idx:<id>`, score = version) to the
 * list (`<ns>:cfg_htr_log:<id>`): history that release wrote must stay visible, numbered on and rolled back to, and
 * the first write of this release moves it into the list.
 */
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * The writes of the earlier release, command for command as its scripts did them (that release's
 * `redis-config-scripts.ts`: archive = HSET history + ZADD index + trim by ZCARD; numbering = max(current, top score)).
 * Sequential plain commands instead of one script: the tests write one at a time, so the result is the same.
 */
function oldRelease(raw: RedisClient, ns: string, id: string, maxVersions: number) {
  const [idx, cfg, htr, , htrIdx] = configKeys(ns, id);
  const archive = async (cur: Record<string, string>, op: string, now: number) => {
    // cjson in the old script encoded the fields read from Redis as strings, opTime (an ARGV) too.
    const rec = { configId: cur.configId, data: cur.data, hash: cur.hash, version: cur.version, createTime: cur.createTime, op, opTime: String(now) };
    await raw.hset(htr, cur.version!, JSON.stringify(rec));
    await raw.zadd(htrIdx, cur.version!, `${cur.version}:${op}:${now}`);
    const excess = (await raw.zcard(htrIdx)) - maxVersions;
    if (excess > 0) {
      const old = await raw.zrange(htrIdx, 0, String(excess - 1), "WITHSCORES");
      for (let i = 1; i < old.length; i += 2) await raw.hdel(htr, old[i]!);
      await raw.zremrangebyrank(htrIdx, 0, excess - 1);
    }
  };
  return {
    async set(data: string, now: number) {
      const cur = await raw.hgetall(cfg);
      const top = await raw.zrevrange(htrIdx, 0, 0, "WITHSCORES");
      const version = Math.max(Number(cur.version ?? 0), Number(top[1] ?? 0)) + 1;
      if (cur.version) await archive(cur, "set", now);
      await raw.hset(cfg, { configId: id, data, hash: sha(data), version, createTime: now });
      await raw.sadd(idx, id);
      return version;
    },
    async remove(now: number) {
      const cur = await raw.hgetall(cfg);
      await archive(cur, "remove", now);
      await raw.del(cfg);
      await raw.srem(idx, id);
    },
  };
}

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`Redis config history written by the sorted-set release, on ${target.name}`, () => {
    let raw: RedisClient;
    const stores: ConfigStore[] = [];
    const open = async (maxVersions: number) => {
      const store = await createRedisConfigStore(await connectRedis(target.url), { maxVersions });
      stores.push(store);
      return store;
    };
    beforeAll(async () => {
      raw = await connectRedis(target.url);
    });
    afterAll(async () => {
      await Promise.all([...stores.map((s) => s.close()), raw?.quit()]);
    });

    const keysOf = (ns: string) => {
      const [, , htr, log, legacy] = configKeys(ns, "app");
      return { htr, log, legacy };
    };
    const versionsOf = async (s: ConfigStore, ns: string) => (await s.versions(ns, "app")).map((v) => [v.version, v.op, v.opTime]);
    /** v1..v5 written by the old release at times 1001..1005: v5 current, 1..4 archived with opTime = next write's. */
    const seedFive = async (ns: string, maxVersions = 10) => {
      const old = oldRelease(raw, ns, "app", maxVersions);
      for (let i = 1; i <= 5; i++) await old.set(`v${i}`, 1000 + i);
      return old;
    };
    const OLD_HISTORY = [
      [4, "set", 1005],
      [3, "set", 1004],
      [2, "set", 1003],
      [1, "set", 1002],
    ];

    it("lists and reads the old history before any write, and the first set moves it into the log and numbers on", async () => {
      const ns = freshNamespace();
      await seedFive(ns);
      const store = await open(10);
      expect(await versionsOf(store, ns)).toEqual(OLD_HISTORY);
      expect(await store.version(ns, "app", 2)).toEqual({ configId: "app", data: "v2", hash: sha("v2"), version: 2, createTime: 1002, op: "set", opTime: 1003 });
      expect(await raw.exists(keysOf(ns).legacy)).toBe(1); // reads do not migrate

      expect(await store.set(ns, "app", "v6", sha("v6"), 2000)).toEqual({ changed: true, version: 6 });
      expect(await raw.exists(keysOf(ns).legacy)).toBe(0);
      expect(await raw.lrange(keysOf(ns).log, 0, -1)).toEqual(["1:set:1002", "2:set:1003", "3:set:1004", "4:set:1005", "5:set:2000"]);
      expect(await versionsOf(store, ns)).toEqual([[5, "set", 2000], ...OLD_HISTORY]);
      expect(await store.rollback(ns, "app", 1, 2001)).toEqual({ changed: true, version: 7 });
      expect((await store.get(ns, "app"))?.data).toBe("v1");
    });

    it("rolls back to an old version as the first write after the upgrade", async () => {
      const ns = freshNamespace();
      await seedFive(ns);
      const store = await open(10);
      expect(await store.rollback(ns, "app", 2, 2000)).toEqual({ changed: true, version: 6 });
      expect(await store.get(ns, "app")).toEqual({ configId: "app", data: "v2", hash: sha("v2"), version: 6, createTime: 2000 });
      expect(await raw.exists(keysOf(ns).legacy)).toBe(0);
      expect(await versionsOf(store, ns)).toEqual([[5, "rollback", 2000], ...OLD_HISTORY]);
    });

    it("removes as the first write after the upgrade and keeps the old history under the remove", async () => {
      const ns = freshNamespace();
      await seedFive(ns);
      const store = await open(10);
      expect(await store.remove(ns, "app", 2000)).toBe(true);
      expect(await raw.exists(keysOf(ns).legacy)).toBe(0);
      expect(await versionsOf(store, ns)).toEqual([[5, "remove", 2000], ...OLD_HISTORY]);
      expect(await store.set(ns, "app", "again", sha("again"), 2001)).toEqual({ changed: true, version: 6 });
    });

    it("numbers on after a delete the old release made (only archived versions, no current record)", async () => {
      const ns = freshNamespace();
      const old = await seedFive(ns);
      await old.remove(1006);
      const store = await open(10);
      expect(await store.get(ns, "app")).toBeUndefined();
      expect(await store.list(ns)).toEqual([]);
      expect(await versionsOf(store, ns)).toEqual([[5, "remove", 1006], ...OLD_HISTORY]);
      expect((await store.version(ns, "app", 5))?.data).toBe("v5");

      // Without the old index the numbering would restart at 1 and overwrite archived version 1.
      expect(await store.set(ns, "app", "reborn", sha("reborn"), 2000)).toEqual({ changed: true, version: 6 });
      expect(await raw.exists(keysOf(ns).legacy)).toBe(0);
      expect(await versionsOf(store, ns)).toEqual([[5, "remove", 1006], ...OLD_HISTORY]);
      expect(await store.list(ns)).toEqual(["app"]);
      expect(await store.rollback(ns, "app", 3, 2001)).toEqual({ changed: true, version: 7 });
      expect((await store.get(ns, "app"))?.data).toBe("v3");
    });

    it("applies the retention across migrated entries, dropping their archived records too", async () => {
      const ns = freshNamespace();
      await seedFive(ns); // archived 1..4
      const store = await open(3);
      expect(await store.set(ns, "app", "v6", sha("v6"), 2000)).toEqual({ changed: true, version: 6 });
      expect(await versionsOf(store, ns)).toEqual([[5, "set", 2000], [4, "set", 1005], [3, "set", 1004]]);
      expect((await raw.hkeys(keysOf(ns).htr)).map(Number).sort((a, b) => a - b)).toEqual([3, 4, 5]);
      expect(await store.version(ns, "app", 2)).toBeUndefined();
    });

    it("migrates an old index larger than one Lua unpack() can take, in version order", async () => {
      const ns = freshNamespace();
      const { htr, legacy } = keysOf(ns);
      const n = 8500; // Lua 5.1 unpacks at most ~8,000 values (LUAI_MAXCSTACK)
      const [idx, cfg] = configKeys(ns, "app");
      const pipeline = raw.pipeline();
      for (let v = 1; v <= n; v++) {
        const rec = { configId: "app", data: `v${v}`, hash: sha(`v${v}`), version: String(v), createTime: String(v), op: "set", opTime: String(v + 1) };
        pipeline.hset(htr, String(v), JSON.stringify(rec)).zadd(legacy, v, `${v}:set:${v + 1}`);
      }
      pipeline.hset(cfg, { configId: "app", data: `v${n + 1}`, hash: sha(`v${n + 1}`), version: n + 1, createTime: n + 1 }).sadd(idx, "app");
      await pipeline.exec();

      const store = await open(10_000);
      expect(await store.versions(ns, "app")).toHaveLength(n);
      expect(await store.set(ns, "app", "next", sha("next"), 99_999)).toEqual({ changed: true, version: n + 2 });
      expect(await raw.exists(legacy)).toBe(0);
      const versions = (await store.versions(ns, "app")).map((v) => v.version);
      expect(versions).toEqual(Array.from({ length: n + 1 }, (_, i) => n + 1 - i));
    });

    it("a listing issued together with the migrating write sees the old history, before or after it", async () => {
      const ns = freshNamespace();
      await seedFive(ns);
      const store = await open(10);
      // Both go out on the same connection in the same tick: a listing made of two separate reads would read the
      // (empty) log before the write and the (deleted) old index after it.
      const [listed] = await Promise.all([versionsOf(store, ns), store.set(ns, "app", "v6", sha("v6"), 2000)]);
      expect(listed).toEqual(OLD_HISTORY);
      expect(await raw.exists(keysOf(ns).legacy)).toBe(0);
    });

    it("while an old release still writes beside this one (rolling upgrade), history stays complete and in order", async () => {
      const ns = freshNamespace();
      const old = await seedFive(ns);
      const store = await open(10);
      expect(await store.set(ns, "app", "v6", sha("v6"), 2000)).toEqual({ changed: true, version: 6 }); // migrates
      expect(await old.set("v7", 2001)).toBe(7); // the old release archives v6 into a new sorted set
      expect(await versionsOf(store, ns)).toEqual([[6, "set", 2001], [5, "set", 2000], ...OLD_HISTORY]);
      expect(await store.set(ns, "app", "v8", sha("v8"), 2002)).toEqual({ changed: true, version: 8 });
      expect(await raw.exists(keysOf(ns).legacy)).toBe(0);
      expect(await versionsOf(store, ns)).toEqual([[7, "set", 2002], [6, "set", 2001], [5, "set", 2000], ...OLD_HISTORY]);
    });
  });
}
