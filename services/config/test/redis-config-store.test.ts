import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster } from "ioredis";
import { connectRedis, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import type { ConfigChange, ConfigStore } from "../src/store/config-store.js";
import { createRedisConfigStore } from "../src/store/redis-config-store.js";
import { configKeys } from "../src/store/redis-config-scripts.js";
import { describeConfigStoreContract, freshNamespace } from "./config-store.contract.js";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

for (const target of redisTargets()) {
  // Each open() is a separate store with its own two connections, like a second process.
  const open = async () => createRedisConfigStore(await connectRedis(target.url), { maxVersions: 5 });
  describeConfigStoreContract(target.name, open, target.skip);

  describe.skipIf(target.skip)(`Redis config store on ${target.name}`, () => {
    let a: ConfigStore;
    let b: ConfigStore;
    let raw: RedisClient; // a plain client that changes data behind the stores' backs (no change event)
    beforeAll(async () => {
      [a, b, raw] = await Promise.all([open(), open(), connectRedis(target.url)]);
    });
    afterAll(async () => {
      await Promise.all([a?.close(), b?.close(), raw?.quit()]);
    });

    it("reports its kind", () => {
      expect(a.kind).toBe(target.name);
    });

    it("serves repeated reads from its cache and drops them when another store changes the config", async () => {
      const ns = freshNamespace();
      await setAndAwaitEvent(a, ns, "app", "one"); // a's own event would drop the entry: let it pass first
      expect((await a.get(ns, "app"))?.data).toBe("one"); // warms a's cache
      // A change that publishes no event is invisible to a: proof that a answers from its cache.
      await raw.hset(configKeys(ns, "app")[1], "data", "tampered");
      expect((await a.get(ns, "app"))?.data).toBe("one");
      expect((await b.get(ns, "app"))?.data).toBe("tampered");
      // A change through b publishes an event; a must drop its entry.
      await b.set(ns, "app", "two", sha("two"), 2);
      await expect.poll(async () => (await a.get(ns, "app"))?.version, { timeout: 2000, interval: 5 }).toBe(2);
      expect((await a.get(ns, "app"))?.data).toBe("two");
    });

    it("a store with nothing cached and no watch receives no change events; a read or a watch resumes them, and its cache stays right", async () => {
      const tag = `idle-feed-${process.pid}-${Date.now()}`;
      const idle = await createRedisConfigStore(await connectRedis(target.url, { redis: { connectionName: tag } }), { maxVersions: 5 });
      const patterns = () => patternSubscriptions(raw, tag);
      const ns = freshNamespace();
      const [, cfgKey] = configKeys(ns, "app");
      try {
        // It only writes: the echo of its own write is all it would be sent.
        await idle.set(ns, "app", "1", sha("1"), 1);
        await expect.poll(patterns, { timeout: 5000 }).toBe(0);
        // Another store's change while it hears nothing: its next read sees it, and wakes it.
        await b.set(ns, "app", "2", sha("2"), 2);
        expect((await idle.get(ns, "app"))?.data).toBe("2");
        await expect.poll(patterns, { timeout: 5000 }).toBe(1);
        // Caching again once the subscription is confirmed: a change without an event is then invisible to it...
        await expect
          .poll(async () => {
            await raw.hset(cfgKey, "data", "2");
            await idle.get(ns, "app");
            await raw.hset(cfgKey, "data", "tampered");
            return (await idle.get(ns, "app"))?.data;
          }, { timeout: 5000, interval: 10 })
          .toBe("2");
        // ...and one through another store is seen.
        await b.set(ns, "app", "3", sha("3"), 3);
        await expect.poll(async () => (await idle.get(ns, "app"))?.data, { timeout: 2000, interval: 5 }).toBe("3");

        // A watch on a paused store resumes it and gets every change.
        await idle.set(ns, "app", "4", sha("4"), 4); // forgets the one entry it had
        await expect.poll(patterns, { timeout: 5000 }).toBe(0);
        const versions: number[] = [];
        const stop = idle.subscribe((c) => void (c.namespace === ns && versions.push(c.version)));
        try {
          await expect.poll(patterns, { timeout: 5000 }).toBe(1);
          await b.set(ns, "app", "5", sha("5"), 5);
          await expect.poll(() => versions, { timeout: 2000 }).toEqual([5]);
        } finally {
          stop();
        }
      } finally {
        await idle.close();
      }
    });

    it("caches absence too, and a create by another store ends it", async () => {
      const ns = freshNamespace();
      expect(await a.get(ns, "later")).toBeUndefined();
      await b.set(ns, "later", "x", sha("x"), 1);
      await expect.poll(async () => (await a.get(ns, "later"))?.data, { timeout: 2000, interval: 5 }).toBe("x");
    });

    it("read-your-writes: a write through a store is visible in that store at once", async () => {
      const ns = freshNamespace();
      await a.set(ns, "rw", "1", sha("1"), 1);
      expect((await a.get(ns, "rw"))?.data).toBe("1");
      for (let i = 2; i <= 20; i++) {
        await a.set(ns, "rw", String(i), sha(String(i)), i);
        expect((await a.get(ns, "rw"))?.data).toBe(String(i));
      }
      await a.remove(ns, "rw", 99);
      expect(await a.get(ns, "rw")).toBeUndefined();
      await a.rollback(ns, "rw", 20, 100);
      expect((await a.get(ns, "rw"))?.data).toBe("20");
    });

    it("rollback and history keep binary-unsafe text exactly (JSON round trip inside Lua)", async () => {
      const ns = freshNamespace();
      const tricky = 'é\u0000\r\n\t"quoted" \\ back/slash 😀 \u2028 ' + "x".repeat(70_000);
      await a.set(ns, "t", tricky, sha(tricky), 1_700_000_000_123);
      await a.set(ns, "t", "other", sha("other"), 1_700_000_000_456);
      expect(await a.version(ns, "t", 1)).toEqual({
        configId: "t", data: tricky, hash: sha(tricky), version: 1, createTime: 1_700_000_000_123, op: "set", opTime: 1_700_000_000_456,
      });
      expect(await a.rollback(ns, "t", 1, 1_700_000_000_789)).toEqual({ changed: true, version: 3 });
      expect(await b.get(ns, "t")).toEqual({ configId: "t", data: tricky, hash: sha(tricky), version: 3, createTime: 1_700_000_000_789 });
    });

    it("all keys of one config, in any namespace form, share one Cluster slot", async () => {
      const tag = freshNamespace("x").replace(/^x-/, "");
      for (const ns of [tag, `cosky-${tag}`, `team-${tag}-x`]) {
        const slots = await Promise.all(configKeys(ns, "dir/a:b{c}.yaml").map((k) => raw.call("CLUSTER", "KEYSLOT", k).catch(() => keySlotFallback(k))));
        expect(new Set(slots).size).toBe(1);
      }
    });

    it("script errors are not reported as an outage", async () => {
      const ns = freshNamespace();
      await raw.set(configKeys(ns, "wrong")[1], "a string, not a hash");
      const err = await a.set(ns, "wrong", "x", sha("x"), 1).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).name).not.toBe("StoreUnavailableError");
      expect((err as Error).message).toMatch(/WRONGTYPE/);
    });

    it.runIf(target.name === "redis-cluster")("one subscription receives the events of namespaces on every master", async () => {
      const cluster = raw as Cluster;
      const masters = cluster.nodes("master");
      expect(masters.length).toBe(3);
      const owner = async (ns: string) => {
        const slot = Number(await raw.call("CLUSTER", "KEYSLOT", configKeys(ns, "e")[1]));
        const slots = (await raw.call("CLUSTER", "SLOTS")) as [number, number, [string, number]][];
        const range = slots.find(([from, to]) => slot >= from && slot <= to)!;
        return `${range[2][0]}:${range[2][1]}`;
      };
      const byNode = new Map<string, string>();
      for (let i = 0; byNode.size < 3 && i < 200; i++) {
        const ns = freshNamespace();
        const node = await owner(ns);
        if (!byNode.has(node)) byNode.set(node, ns);
      }
      expect(byNode.size).toBe(3);
      const seen: ConfigChange[] = [];
      const stop = b.subscribe((c) => seen.push(c));
      try {
        for (const ns of byNode.values()) await a.set(ns, "e", "1", sha("1"), 1);
        await expect.poll(() => seen.filter((c) => [...byNode.values()].includes(c.namespace)).length, { timeout: 3000 }).toBe(3);
      } finally {
        stop();
      }
    });
  });
}

/** Writes through `store` and waits until the store's own change event has come back through its subscription. */
/** The pattern subscriptions of the connections named `tag` (on every node of a Cluster). */
async function patternSubscriptions(client: RedisClient, tag: string): Promise<number> {
  const nodes = client instanceof Cluster ? client.nodes("all") : [client];
  let count = 0;
  for (const node of nodes) {
    for (const line of String(await node.client("LIST")).split("\n")) {
      if (line.match(/ name=(\S*)/)?.[1].includes(tag)) count += Number(line.match(/ psub=(\d+)/)?.[1] ?? 0);
    }
  }
  return count;
}

async function setAndAwaitEvent(store: ConfigStore, ns: string, id: string, data: string): Promise<void> {
  let seen = false;
  const stop = store.subscribe((c) => {
    if (c.namespace === ns && c.configId === id) seen = true;
  });
  try {
    await store.set(ns, id, data, sha(data), Date.now());
    await expect.poll(() => seen, { timeout: 3000, interval: 5 }).toBe(true);
  } finally {
    stop();
  }
}

/** Standalone servers have no CLUSTER KEYSLOT: compute the hash-tag part the way Redis does. */
function keySlotFallback(key: string): string {
  const open = key.indexOf("{");
  const close = open >= 0 ? key.indexOf("}", open + 1) : -1;
  return close > open + 1 ? key.slice(open + 1, close) : key;
}
