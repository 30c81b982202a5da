import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Cluster, Redis } from "ioredis";
import { connectRedis, type RedisClient } from "@gov/redis";
import { startRedis, startRedisCluster, type RedisClusterServers, type RedisServer } from "@gov/testkit";
import { StoreUnavailableError, type ConfigStore } from "../src/store/config-store.js";
import { createRedisConfigStore } from "../src/store/redis-config-store.js";
import { configKeys } from "../src/store/redis-config-scripts.js";
import { freshNamespace } from "./config-store.contract.js";

// These tests stop servers and kill connections, so they use private servers, never the shared ones.
const skip = inject("redisSkipReason");
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** Waits for a store's own change event, so that it cannot arrive after the cache was warmed. */
async function setAndAwaitEvent(store: ConfigStore, ns: string, id: string, data: string): Promise<void> {
  let seen = false;
  const stop = store.subscribe((c) => void (c.namespace === ns && c.configId === id && (seen = true)));
  try {
    await store.set(ns, id, data, sha(data), Date.now());
    await expect.poll(() => seen, { timeout: 3000, interval: 5 }).toBe(true);
  } finally {
    stop();
  }
}

/**
 * Warms the store's cache, changes the data behind its back (no event), checks the cache still answers,
 * then kills every Pub/Sub connection on the servers: the store must notice, clear its cache and resubscribe.
 */
async function provesCacheClearedOnSubscriptionLoss(store: ConfigStore, raw: RedisClient, servers: Redis[]) {
  const ns = freshNamespace();
  await setAndAwaitEvent(store, ns, "app", "before");
  expect((await store.get(ns, "app"))?.data).toBe("before");
  await raw.hset(configKeys(ns, "app")[1], "data", "missed");
  expect((await store.get(ns, "app"))?.data).toBe("before"); // served from the cache
  for (const s of servers) await s.call("CLIENT", "KILL", "TYPE", "pubsub");
  await expect.poll(async () => (await store.get(ns, "app"))?.data, { timeout: 5000, interval: 20 }).toBe("missed");
  // ... and it subscribes again: changes come back as events (those published before it is back are lost).
  let seen = 0;
  const stop = store.subscribe((c) => void (c.namespace === ns && seen++));
  try {
    let n = 0;
    await expect.poll(async () => (await store.set(ns, "app", `after ${++n}`, sha(`after ${n}`), n), seen > 0), { timeout: 5000, interval: 50 }).toBe(true);
  } finally {
    stop();
  }
}

/** A standalone Redis of the describe block's own, a config store on it (5 versions kept) and a raw client. */
function ownStandaloneRedis(): { server: RedisServer; store: ConfigStore; raw: Redis } {
  const own = {} as { server: RedisServer; store: ConfigStore; raw: Redis };
  beforeAll(async () => {
    own.server = await startRedis();
    own.store = await createRedisConfigStore(await connectRedis(own.server.url), { maxVersions: 5 });
    own.raw = (await connectRedis(own.server.url)) as Redis;
  });
  afterAll(async () => {
    await own.store?.close();
    own.raw?.disconnect();
    await own.server?.stop();
  });
  return own;
}

describe.skipIf(skip)("Redis config store: outages and lost subscriptions (standalone)", () => {
  const own = ownStandaloneRedis();

  it("clears its cache when its subscription connection drops", async () => {
    await provesCacheClearedOnSubscriptionLoss(own.store, own.raw, [own.raw]);
  });

  it("rejects every call promptly with StoreUnavailableError while Redis is down, and works again after", async () => {
    const ns = freshNamespace();
    await setAndAwaitEvent(own.store, ns, "warm", "cached before the outage");
    expect((await own.store.get(ns, "warm"))?.data).toBe("cached before the outage");

    await own.server.stop();
    const calls: [string, () => Promise<unknown>][] = [
      ["list", () => own.store.list(ns)],
      ["get (cached key)", () => own.store.get(ns, "warm")],
      ["get", () => own.store.get(ns, "other")],
      ["set", () => own.store.set(ns, "warm", "new", sha("new"), 2)],
      ["remove", () => own.store.remove(ns, "warm", 3)],
      ["rollback", () => own.store.rollback(ns, "warm", 1, 4)],
      ["versions", () => own.store.versions(ns, "warm")],
      ["version", () => own.store.version(ns, "warm", 1)],
    ];
    for (const [name, run] of calls) {
      const started = Date.now();
      const err = await run().then(
        () => new Error(`${name} resolved while Redis was down`),
        (e: unknown) => e,
      );
      expect(err, name).toBeInstanceOf(StoreUnavailableError);
      expect((err as Error).message, name).toMatch(
        new RegExp(`^Redis at 127\\.0\\.0\\.1:${own.server.port} is unavailable \\(.+\\): (nothing was written; )?retry when it is back$`),
      );
      expect(Date.now() - started, name).toBeLessThan(2000);
    }

    await own.server.start(); // an empty server on the same port
    await expect
      .poll(() => own.store.set(ns, "probe", "p", sha("p"), 5).then(() => true, () => false), { timeout: 10_000, interval: 100 })
      .toBe(true);
    // The pre-outage value must not come back from the cache: the restarted server has no such config.
    await expect.poll(() => own.store.get(ns, "warm"), { timeout: 3000 }).toBeUndefined();
    expect(await own.store.list(ns)).toEqual(["probe"]);
    await setAndAwaitEvent(own.store, ns, "warm", "after the outage"); // events flow again
    expect((await own.store.get(ns, "warm"))?.data).toBe("after the outage");
  });
});

describe.skipIf(skip)("Redis config store: lost subscription on a Cluster", () => {
  let cluster: RedisClusterServers;
  let store: ConfigStore;
  let raw: Cluster;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    store = await createRedisConfigStore(await connectRedis(cluster.url), { maxVersions: 5 });
    raw = (await connectRedis(cluster.url)) as Cluster;
  });
  afterAll(async () => {
    await store?.close();
    raw?.disconnect();
    await cluster?.stop();
  });

  it("clears its cache when the node carrying its subscription drops it, and resubscribes", async () => {
    await provesCacheClearedOnSubscriptionLoss(store, raw, raw.nodes("master"));
  });
});

/**
 * A Redis that is up but refuses writes — full (`maxmemory` with `noeviction`: OOM), turned into a read-only replica
 * (READONLY), unable to persist (MISCONF), short of replicas (NOREPLICAS) — refuses a script at its first write, before
 * it changed anything: a store outage whose write was not applied (503 "nothing was written"), never a bug (500).
 */
describe.skipIf(skip)("Redis config store: a server that refuses writes", () => {
  const own = ownStandaloneRedis();

  const refusals: [string, () => Promise<unknown>, () => Promise<unknown>][] = [
    ["full (maxmemory, noeviction)", () => own.raw.config("SET", "maxmemory", "1"), () => own.raw.config("SET", "maxmemory", "0")],
    ["a read-only replica", () => own.raw.config("SET", "min-replicas-to-write", "0").then(() => own.raw.call("REPLICAOF", "127.0.0.1", "1")), () => own.raw.call("REPLICAOF", "NO", "ONE")],
    ["short of replicas (min-replicas-to-write)", () => own.raw.config("SET", "min-replicas-to-write", "1"), () => own.raw.config("SET", "min-replicas-to-write", "0")],
  ];
  for (const [name, refuse, allow] of refusals) {
    it(`${name}: every write fails as unavailable, nothing written; reads go on`, async () => {
      const ns = freshNamespace();
      await own.store.set(ns, "app", "v1", sha("v1"), 1);
      await own.store.set(ns, "app", "v2", sha("v2"), 2);
      await own.raw.config("SET", "maxmemory-policy", "noeviction");
      await refuse();
      try {
        const writes: [string, () => Promise<unknown>][] = [
          ["set", () => own.store.set(ns, "app", "v3", sha("v3"), 3)],
          ["create", () => own.store.create(ns, "new", "n", sha("n"), 3)],
          ["rollback", () => own.store.rollback(ns, "app", 1, 3)],
          ["remove", () => own.store.remove(ns, "app", 3)],
        ];
        for (const [op, run] of writes) {
          const err = await run().then(
            () => new Error(`${op} succeeded`),
            (e: unknown) => e,
          );
          expect(err, op).toBeInstanceOf(StoreUnavailableError);
          expect((err as Error).message, op).toMatch(/nothing was written/);
        }
        expect(await own.store.get(ns, "app")).toMatchObject({ data: "v2", version: 2 });
      } finally {
        await allow();
      }
      expect(await own.store.get(ns, "app")).toMatchObject({ data: "v2", version: 2 });
      expect((await own.store.versions(ns, "app")).map((v) => v.version)).toEqual([1]);
      expect(await own.store.get(ns, "new")).toBeUndefined();
    });
  }
});
