import { connectRedis, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryRegistryStore } from "../src/store/memory-registry-store.js";
import { createRedisRegistryStore } from "../src/store/redis-registry-store.js";
import type { RegistryStore } from "../src/store/registry-store.js";
import { watchServices, type ServiceWatchEvent } from "../src/watch-services.js";
import { hashed } from "./harness.js";
import { freshNamespace, instance } from "./registry-store.contract.js";

const T0 = 1_700_000_000_000;
const opOf = (e: ServiceWatchEvent) => ("serviceIds" in e ? `${e.op}:${e.serviceIds.join(",")}` : `${e.op}:${e.serviceId}`);

/** Collects a service-list watch's events as "op:ids". */
function collect(store: RegistryStore, ns: string) {
  const stop = new AbortController();
  const ops: string[] = [];
  const done = (async () => {
    for await (const e of watchServices(store, ns, stop.signal)) ops.push(opOf(e));
  })();
  return {
    ops,
    async close() {
      stop.abort();
      await done;
    },
  };
}

describe("watchServices on the embedded store", () => {
  it("reports what changed since the client's last state: a service removed and added back between reads is no change", async () => {
    const store = createMemoryRegistryStore();
    const ns = freshNamespace();
    await store.putService(ns, "a");
    const stop = new AbortController();
    const it = watchServices(store, ns, stop.signal)[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual(hashed({ op: "current", serviceIds: ["a"] }));
    // While the client does not read: a removed and added again, b added, c added and removed.
    expect(await store.deleteService(ns, "a", T0)).toBe("removed");
    await store.putService(ns, "a");
    await store.register(ns, instance("b", "h", 1), T0);
    await store.putService(ns, "c");
    expect(await store.deleteService(ns, "c", T0)).toBe("removed");
    expect((await it.next()).value).toEqual(hashed({ op: "add", serviceId: "b" }));
    // Nothing else is pending: the next change is the next message.
    await store.putService(ns, "d");
    expect((await it.next()).value).toEqual(hashed({ op: "add", serviceId: "d" }));
    expect(await store.deleteService(ns, "b", T0 + 10 ** 9)).toBe("removed"); // its instance expired by then
    expect((await it.next()).value).toEqual(hashed({ op: "remove", serviceId: "b" }));
    stop.abort();
    expect((await it.next()).done).toBe(true);
  });

  it("a lost event feed (onResync) gets one resync with the list as it is now, then changes again", async () => {
    const memory = createMemoryRegistryStore();
    let resync: (() => void) | undefined;
    // The real store, with its resync callback captured: the embedded store never loses its feed by itself.
    const store: RegistryStore = { ...memory, subscribe: (listener, onResync) => ((resync = onResync), memory.subscribe(listener, onResync)) };
    const ns = freshNamespace();
    const w = collect(store, ns);
    await expect.poll(() => w.ops).toEqual(["current:"]);
    await memory.putService(ns, "x");
    await memory.putService(ns, "y");
    resync!();
    await expect.poll(() => w.ops.at(-1)).toBe("resync:x,y");
    await memory.putService(ns, "z");
    await expect.poll(() => w.ops.at(-1)).toBe("add:z");
    expect(w.ops.filter((op) => op.startsWith("add:x") || op.startsWith("add:y")).length).toBeLessThanOrEqual(2); // never reported twice after the resync
    await w.close();
  });

  it("ignores instance changes and other namespaces' services", async () => {
    const store = createMemoryRegistryStore();
    const ns = freshNamespace();
    const w = collect(store, ns);
    await expect.poll(() => w.ops).toEqual(["current:"]);
    await store.putService(freshNamespace(), "elsewhere");
    await store.register(ns, instance("s", "h", 1), T0);
    await store.register(ns, instance("s", "h", 2), T0);
    await store.renew(ns, "s", "s@http#h#1", T0 + 50_000);
    await store.deregister(ns, "s", "s@http#h#2", T0);
    await store.putService(ns, "last");
    await expect.poll(() => w.ops).toEqual(["current:", "add:s", "add:last"]);
    await w.close();
  });
});

/** Kills this test's Pub/Sub connections (by their client name) on every node, as a network cut would. */
async function killSubscribers(admin: RedisClient, name: string): Promise<number> {
  const nodes = admin instanceof Cluster ? admin.nodes("master") : [admin];
  let killed = 0;
  for (const node of nodes) {
    const list = String(await node.call("CLIENT", "LIST", "TYPE", "pubsub"));
    for (const line of list.split("\n")) {
      // A Cluster client names its subscriber connection "ioredis-cluster(subscriber)-<name>".
      if (!new RegExp(` name=\\S*${name} `).test(line)) continue;
      await node.call("CLIENT", "KILL", "ID", /\bid=(\d+)/.exec(line)![1]);
      killed++;
    }
  }
  return killed;
}

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`watchServices on ${target.name}: the event feed is cut`, () => {
    const name = `watch-services-${process.pid}`;
    let store: RegistryStore;
    let admin: RedisClient;
    beforeAll(async () => {
      store = await createRedisRegistryStore(await connectRedis(target.url, { redis: { connectionName: name } }), { kind: target.name });
      admin = await connectRedis(target.url);
    });
    afterAll(async () => {
      await store?.close();
      admin?.disconnect();
    });

    it("changes made while the subscription is down arrive as a resync with the list as it is now; none lost", async () => {
      const ns = freshNamespace();
      await store.putService(ns, "before");
      const w = collect(store, ns);
      try {
        await expect.poll(() => w.ops, { timeout: 3000 }).toEqual(["current:before"]);
        await store.putService(ns, "settled");
        await expect.poll(() => w.ops.at(-1), { timeout: 1000, interval: 10 }).toBe("add:settled"); // the feed is live
        expect(await killSubscribers(admin, name)).toBeGreaterThan(0);
        // Written at once, while the subscription is reconnecting: its event may be missed, the resync must not be.
        await store.putService(ns, "during");
        expect(await store.deleteService(ns, "before", T0)).toBe("removed");
        await expect.poll(() => w.ops.some((op) => op.startsWith("resync:")), { timeout: 10_000, interval: 20 }).toBe(true);
        await store.putService(ns, "after");
        await expect.poll(() => w.ops.at(-1), { timeout: 3000, interval: 10 }).toBe("add:after");
        // Whatever arrived between, replaying the messages gives the list as it is.
        const state = new Set<string>();
        for (const op of w.ops) {
          const [kind, ids] = op.split(":");
          if (kind === "current" || kind === "resync") {
            state.clear();
            for (const id of ids.split(",").filter(Boolean)) state.add(id);
          } else if (kind === "add") state.add(ids);
          else state.delete(ids);
        }
        expect([...state].sort()).toEqual(await store.listServices(ns));
      } finally {
        await w.close();
      }
    }, 30_000);
  });
}

describe("watchServices: many watches of one namespace", () => {
  for (const target of [{ name: "embedded", skip: "", url: "" }, ...redisTargets().filter((t) => t.name === "redis")]) {
    it.skipIf(target.skip)(`on ${target.name}: 20 watches share their reads of the list, and each sees every add`, async () => {
      const store = target.url ? await createRedisRegistryStore(await connectRedis(target.url)) : createMemoryRegistryStore();
      let reads = 0;
      const counted: RegistryStore = { ...store, listServices: (ns) => (reads++, store.listServices(ns)) };
      const ns = freshNamespace();
      for (let i = 0; i < 500; i++) await store.putService(ns, `base${i}`);
      const watches = Array.from({ length: 20 }, () => collect(counted, ns));
      try {
        await expect.poll(() => watches.every((w) => w.ops.length === 1), { timeout: 5_000 }).toBe(true);
        const first = reads;
        for (let i = 0; i < 50; i++) {
          await store.putService(ns, `s${i}`);
          await new Promise((r) => setTimeout(r, 2)); // one at a time: the watches wake for each, not for all together
        }
        await expect.poll(() => watches.map((w) => w.ops.filter((o) => o.startsWith("add:")).length), { timeout: 10_000 }).toEqual(watches.map(() => 50));
        // one read per change (or fewer, changes that arrive together share one), not one per change and watch
        expect(reads - first).toBeLessThanOrEqual(2 * 50);
      } finally {
        await Promise.all(watches.map((w) => w.close()));
        await store.close();
      }
    });
  }
});
