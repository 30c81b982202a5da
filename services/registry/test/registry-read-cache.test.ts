import { connectRedis, type RedisClient } from "@gov/redis";
import { redisTargets, startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { serviceKeys } from "../src/store/redis-registry-scripts.js";
import { createRegistryReadCache } from "../src/store/registry-read-cache.js";
import { createRedisRegistryStore } from "../src/store/redis-registry-store.js";
import type { InstanceRecord, RegistryStore } from "../src/store/registry-store.js";
import { freshNamespace, instance } from "./registry-store.contract.js";

const ids = (rs: { instanceId: string }[]) => rs.map((r) => r.instanceId);

/**
 * The events `store` has received for `ns` ("op instanceId"). A store hears its own writes' events too, after the
 * write returned; the tests wait for them before filling the cache, so that a late echo cannot empty it again.
 */
function eventsOf(store: RegistryStore, ns: string) {
  const seen: string[] = [];
  const stop = store.subscribe((c) => c.namespace === ns && seen.push(`${c.op} ${c.instanceId ?? c.serviceId}`));
  return { seen, stop, heard: (event: string) => expect.poll(() => seen, { timeout: 3000, interval: 5 }).toContain(event) };
}

/** Registers `r` through `writer` and waits until `reader` has received the event (see eventsOf). */
async function registerHeard(writer: RegistryStore, reader: RegistryStore, ns: string, r: InstanceRecord, now: number) {
  const events = eventsOf(reader, ns);
  try {
    await writer.register(ns, r, now);
    await events.heard(`register ${r.instanceId}`);
  } finally {
    events.stop();
  }
}

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`registry read cache on ${target.name}: two stores on one Redis, like two processes`, () => {
    let a: RegistryStore; // the writer
    let b: RegistryStore; // the cached reader
    beforeAll(async () => {
      a = await createRedisRegistryStore(await connectRedis(target.url));
      b = await createRedisRegistryStore(await connectRedis(target.url));
    });
    afterAll(async () => {
      await a?.close();
      await b?.close();
    });

    it("a write in one store is seen by the other's cached read within 1 s", async () => {
      const ns = freshNamespace("c");
      const events = eventsOf(b, ns);
      const x = instance("svc", "x", 1, {}, Date.now());
      await a.register(ns, x, Date.now());
      await events.heard(`register ${x.instanceId}`);
      expect(ids(await b.listInstances(ns, "svc", Date.now()))).toEqual([x.instanceId]);
      // An unpublished renewal (most of the ttl left) is invisible to b's entry: proof that b now reads from memory.
      const renewed = await a.renew(ns, "svc", x.instanceId, Date.now() + 5);
      expect((await b.listInstances(ns, "svc", Date.now()))[0].ttlAt).toBe(x.ttlAt);
      expect(renewed?.ttlAt).toBeGreaterThan(x.ttlAt!);

      const list = () => b.listInstances(ns, "svc", Date.now());
      const y = instance("svc", "y", 2, { metadata: { zone: "a" } }, Date.now());
      await a.register(ns, y, Date.now());
      await expect.poll(async () => ids(await list()), { timeout: 1000, interval: 5 }).toEqual([x.instanceId, y.instanceId]);
      await a.setMetadata(ns, "svc", x.instanceId, { v: "2" }, Date.now());
      await expect.poll(async () => (await list())[0].metadata, { timeout: 1000, interval: 5 }).toEqual({ v: "2" });
      await a.register(ns, instance("svc", "x", 1, { ttlMs: 0 }), Date.now()); // ephemeral → fixed
      await expect.poll(async () => (await list())[0].isEphemeral, { timeout: 1000, interval: 5 }).toBe(false);
      await a.deregister(ns, "svc", y.instanceId, Date.now());
      await expect.poll(async () => ids(await list()), { timeout: 1000, interval: 5 }).toEqual([x.instanceId]);
      await a.deregister(ns, "svc", x.instanceId, Date.now());
      expect(await a.deleteService(ns, "svc", Date.now())).toBe("removed");
      await expect.poll(async () => ids(await list()), { timeout: 1000, interval: 5 }).toEqual([]);
      events.stop();
    });

    it("unpublished renewals never make it drop a live instance, and an instance is gone the moment its ttl passes", async () => {
      const ns = freshNamespace("c");
      const T = 1_700_000_000_000;
      const r = instance("svc", "h", 1, { ttlMs: 1000 }, T);
      await registerHeard(a, b, ns, r, T);
      expect(await b.listInstances(ns, "svc", T)).toEqual([r]);
      // Renewed by the other store with more than half the ttl left: nothing is published.
      expect(await a.renew(ns, "svc", r.instanceId, T + 100)).toEqual({ ttlAt: T + 1100 });
      expect(await a.renew(ns, "svc", r.instanceId, T + 200)).toEqual({ ttlAt: T + 1200 });
      expect(await b.listInstances(ns, "svc", T + 999)).toEqual([r]); // the entry as read, still current
      // Its known expiry passed: the entry is no longer current, the store is read again and has it renewed.
      expect(await b.listInstances(ns, "svc", T + 1000)).toEqual([{ ...r, ttlAt: T + 1200 }]);
      expect(ids(await b.listInstances(ns, "svc", T + 1199))).toEqual([r.instanceId]);
      // Nobody writes, nothing is published: still, at its ttlAt it is not returned.
      expect(await b.listInstances(ns, "svc", T + 1200)).toEqual([]);
      expect(await b.getInstance(ns, "svc", r.instanceId, T + 1200)).toBeUndefined();
    });

    it("a re-registration with a shorter ttl reaches the cached entry (it would otherwise keep a dead instance)", async () => {
      const ns = freshNamespace("c");
      const T = 1_700_000_000_000;
      await registerHeard(a, b, ns, instance("svc", "h", 1, { ttlMs: 60_000 }, T), T);
      expect(ids(await b.listInstances(ns, "svc", T))).toEqual(["svc@http#h#1"]);
      await a.register(ns, instance("svc", "h", 1, { ttlMs: 100 }, T + 10), T + 10); // lives until T + 110
      await expect.poll(async () => b.listInstances(ns, "svc", T + 110), { timeout: 1000, interval: 5 }).toEqual([]);
    });

    it("a change to one instance of a large cached service reads that instance again, not the whole service", async () => {
      const ns = freshNamespace("c");
      const now = Date.now();
      for (let i = 0; i < 2000; i += 500) await Promise.all(Array.from({ length: 500 }, (_, j) => a.register(ns, instance("svc", `h${i + j}`, 1, { ttlMs: 600_000 }, now), now)));
      const events = eventsOf(b, ns);
      await registerHeard(a, b, ns, instance("svc", "last", 1, { ttlMs: 600_000 }, now), now);
      const list = () => b.listInstances(ns, "svc", Date.now());
      expect(await list()).toHaveLength(2001); // cached now
      const server = await connectRedis(target.url);
      // whole-service reads (HGETALL) of this namespace's keys, on every node (a Cluster's slot may be on any), watched
      // with MONITOR: counting all HGETALLs (INFO commandstats) also counted those of the test files running beside it
      const nodes = "nodes" in server ? (server as unknown as { nodes(role: string): RedisClient[] }).nodes("master") : [server];
      const monitors = await Promise.all(nodes.map((node) => (node as unknown as { monitor(): Promise<{ on(e: "monitor", f: (time: string, args: string[]) => void): void; disconnect(): void }> }).monitor()));
      let wholeReadsSeen = 0;
      const marks = new Set<string>();
      for (const m of monitors) {
        m.on("monitor", (_time, args) => {
          if (args[0]?.toLowerCase() === "echo") marks.add(args[1]);
          else if (args[0]?.toLowerCase() === "hgetall" && args[1]?.startsWith(ns)) wholeReadsSeen++;
        });
      }
      let mark = 0;
      const wholeReads = async () => {
        // a node shows its commands to MONITOR in order: once it has shown this echo, it has shown all before it
        const sent = nodes.map(() => `${ns}:mark:${mark++}`);
        await Promise.all(nodes.map((node, i) => node.echo(sent[i])));
        await vi.waitFor(() => expect(sent.every((m) => marks.has(m))).toBe(true), { timeout: 5000, interval: 5 });
        return wholeReadsSeen;
      };
      try {
        const before = await wholeReads();
        const y = instance("svc", "new", 1, { ttlMs: 600_000, metadata: { zone: "b" } }, Date.now());
        await a.register(ns, y, Date.now());
        await events.heard(`register ${y.instanceId}`);
        await a.setMetadata(ns, "svc", "svc@http#h7#1", { zone: "c" }, Date.now());
        await events.heard("metadata svc@http#h7#1");
        await a.deregister(ns, "svc", "svc@http#h8#1", Date.now());
        await events.heard("deregister svc@http#h8#1");
        const after = await list();
        expect(after).toHaveLength(2001);
        expect(ids(after)).toEqual([...ids(after)].sort()); // still in instance-id order
        expect(after.find((r) => r.instanceId === y.instanceId)?.metadata).toEqual({ zone: "b" });
        expect(after.find((r) => r.instanceId === "svc@http#h7#1")?.metadata).toEqual({ zone: "c" });
        expect(ids(after)).not.toContain("svc@http#h8#1");
        expect(await wholeReads()).toBe(before);
        expect(after).toEqual(await a.listInstances(ns, "svc", Date.now())); // what a fresh read of the store says
      } finally {
        events.stop();
        for (const m of monitors) m.disconnect();
        await server.quit();
      }
    });

    it("a renewal through the store itself updates its cached entry", async () => {
      const ns = freshNamespace("c");
      const T = 1_700_000_000_000;
      const r = instance("svc", "h", 1, { ttlMs: 1000 }, T);
      await registerHeard(b, b, ns, r, T);
      expect(await b.listInstances(ns, "svc", T)).toEqual([r]);
      expect(await b.renew(ns, "svc", r.instanceId, T + 100)).toEqual({ ttlAt: T + 1100 });
      expect(await b.listInstances(ns, "svc", T + 100)).toEqual([{ ...r, ttlAt: T + 1100 }]);
      expect(await b.renew(ns, "svc", "svc@http#nope#1", T + 100)).toBeUndefined();
    });
  });
}

describe.skipIf(inject("redisSkipReason"))("registry read cache: event feed lost and back", () => {
  let redis: RedisServer;
  let raw: RedisClient;
  let b: RegistryStore;
  beforeAll(async () => {
    redis = await startRedis(); // its own server: the test cuts every subscriber connection
    raw = await connectRedis(redis.url);
    b = await createRedisRegistryStore(await connectRedis(redis.url));
  });
  afterAll(async () => {
    await b?.close();
    await raw?.quit();
    await redis?.stop();
  });

  it("a resync drops the cache: a change whose event was missed is seen once the subscription is back", async () => {
    const ns = freshNamespace("c");
    const now = Date.now();
    for (const host of ["x", "y"]) await registerHeard(b, b, ns, instance("svc", host, 1, {}, now), now);
    expect(ids(await b.listInstances(ns, "svc", Date.now()))).toEqual(["svc@http#x#1", "svc@http#y#1"]);
    // y removed behind the store's back: no event, as if it had been published while the subscription was down
    const [, itc, meta, ttl] = serviceKeys(ns, "svc");
    await raw.multi().hdel(itc, "svc@http#y#1").hdel(meta, "svc@http#y#1").zrem(ttl, "svc@http#y#1").exec();
    expect(ids(await b.listInstances(ns, "svc", Date.now()))).toEqual(["svc@http#x#1", "svc@http#y#1"]);
    await raw.call("CLIENT", "KILL", "TYPE", "pubsub");
    await expect.poll(async () => ids(await b.listInstances(ns, "svc", Date.now())), { timeout: 5000, interval: 20 }).toEqual(["svc@http#x#1"]);
  });
});

describe("registry read cache: bounds and late reads", () => {
  const T = 1_700_000_000_000;
  const records = (serviceId: string, n: number) => Array.from({ length: n }, (_, i) => instance(serviceId, "h", i + 1, {}, T));
  const fill = (cache: ReturnType<typeof createRegistryReadCache>, serviceId: string, n: number) =>
    cache.end(cache.begin("ns", serviceId), { instances: records(serviceId, n), readAt: T });

  it("keeps at most maxServices services and maxInstances instances; a service larger than the bound is not kept", () => {
    const cache = createRegistryReadCache({ maxServices: 5, maxInstances: 20 });
    cache.clear(true);
    for (let i = 0; i < 10; i++) {
      fill(cache, `s${i}`, 3);
      expect(cache.size.services).toBeLessThanOrEqual(5);
      expect(cache.size.instances).toBeLessThanOrEqual(20);
    }
    expect(cache.lookup("ns", "s9", T)).toHaveLength(3); // the newest stays
    expect(cache.lookup("ns", "s0", T)).toBeUndefined(); // the oldest went
    fill(cache, "big", 21);
    expect(cache.lookup("ns", "big", T)).toBeUndefined();
    expect(cache.size.instances).toBeLessThanOrEqual(20);
  });

  it("a read that started before an invalidation or a clear does not store its result; nothing is kept until enabled", () => {
    const cache = createRegistryReadCache();
    fill(cache, "s", 1);
    expect(cache.lookup("ns", "s", T)).toBeUndefined(); // not enabled yet (the event feed is not live)
    cache.clear(true);
    const late = cache.begin("ns", "s");
    cache.invalidate("ns", "s");
    cache.end(late, { instances: records("s", 1), readAt: T });
    expect(cache.lookup("ns", "s", T)).toBeUndefined();
    const beforeClear = cache.begin("ns", "s");
    cache.clear(true);
    cache.end(beforeClear, { instances: records("s", 1), readAt: T });
    expect(cache.lookup("ns", "s", T)).toBeUndefined();
    fill(cache, "s", 1);
    expect(cache.lookup("ns", "s", T)).toHaveLength(1);
    expect(cache.lookup("ns", "s", T - 1)).toBeUndefined(); // before the read: it may have missed an instance live then
    expect(cache.lookup("ns", "s", T + 60_000)).toBeUndefined(); // the ttl passed
  });

  it("an instance changed since the read is read again alone; a read of it that raced another change is not used", () => {
    const cache = createRegistryReadCache();
    cache.clear(true);
    fill(cache, "s", 3);
    const [r0, r1, r2] = records("s", 3);
    cache.instanceChanged("ns", "s", r1.instanceId);
    expect(cache.lookup("ns", "s", T)).toEqual({ stale: [r1.instanceId] });
    // the stale one read again, while another instance changes: the result may be older than that change
    const racing = cache.begin("ns", "s");
    cache.instanceChanged("ns", "s", r2.instanceId);
    expect(cache.endPatch(racing, [r1.instanceId], [{ ...r1, weight: 7 }])).toBeUndefined();
    expect(cache.lookup("ns", "s", T)).toEqual({ stale: [r1.instanceId, r2.instanceId] });
    // read again undisturbed: used, in id order, and the entry is whole again; a gone one is left out
    const patch = cache.begin("ns", "s");
    const patched = cache.endPatch(patch, [r2.instanceId, r1.instanceId], [undefined, { ...r1, weight: 7 }]);
    expect(patched?.map((r) => [r.instanceId, r.weight])).toEqual([[r0.instanceId, r0.weight], [r1.instanceId, 7]]);
    expect(cache.lookup("ns", "s", T)).toEqual(patched);
    expect(cache.size.instances).toBe(2);
    // a deregistration needs no read
    cache.instanceGone("ns", "s", r0.instanceId);
    expect(cache.lookup("ns", "s", T)).toHaveLength(1);
    // past MAX_STALE changed instances the entry goes: one read of the service is then cheaper
    for (let i = 0; i < 33; i++) cache.instanceChanged("ns", "s", `s@http#x${i}#1`);
    expect(cache.lookup("ns", "s", T)).toBeUndefined();
  });

  it("removals and renewals in bursts (a sweep's events) are applied by the next read, each cheaply, none lost", () => {
    const cache = createRegistryReadCache();
    cache.clear(true);
    const all = records("big", 20_000).map((r, i) => ({ ...r, ttlAt: T + 1000 + i }));
    cache.end(cache.begin("ns", "big"), { instances: all, readAt: T });
    // 4,000 expiries in one turn: once, each copied the whole service (about a second here); now a set insertion
    const started = performance.now();
    for (let i = 0; i < 4000; i++) cache.instanceGone("ns", "big", all[2 * i].instanceId);
    // (~20 ms idle; the bound leaves room for a stalled CI process and still catches the copy per expiry)
    expect(performance.now() - started).toBeLessThan(500);
    cache.instanceGone("ns", "big", "big@http#not-held#1"); // not in the entry: passed over
    // the earliest left (all[1]) renewed through this store: the entry is current past its old ttl
    cache.renewed("ns", "big", all[1].instanceId, T + 50_000);
    const hit = cache.lookup("ns", "big", T + 1001.5) as readonly InstanceRecord[];
    expect(hit).toHaveLength(16_000);
    expect(hit.filter((_, i) => i < 4000).every((r) => Number(r.instanceId.split("#")[2]) % 2 === 0)).toBe(true); // the odd ports 1, 3… went
    expect(hit.find((r) => r.instanceId === all[1].instanceId)?.ttlAt).toBe(T + 50_000);
    expect(cache.size.instances).toBe(16_000);
    expect(cache.lookup("ns", "big", T + 1003.5)).toBeUndefined(); // all[3]'s ttl passed: read the store
    // a renewal of an instance that went is not brought back; a burst past the entry's size is applied at once
    cache.instanceGone("ns", "big", all[5].instanceId);
    cache.renewed("ns", "big", all[5].instanceId, T + 90_000);
    for (let i = 0; i < 16_010; i++) cache.instanceGone("ns", "big", `big@http#gone-${i}#1`);
    expect(cache.size.instances).toBe(15_999);
  });
});
