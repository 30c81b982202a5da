import { describe, expect, it, vi } from "vitest";
import { createMemoryRegistryStore } from "../src/store/memory-registry-store.js";
import { MAX_QUEUED_CHANGES, watchInstances } from "../src/watch-instances.js";
import { hashed } from "./harness.js";
import { instance } from "./registry-store.contract.js";

describe("watchInstances", () => {
  it("a watcher that falls more than MAX_QUEUED_CHANGES behind gets one resync with the state as it is now", async () => {
    const store = createMemoryRegistryStore();
    const stop = new AbortController();
    const it = watchInstances(store, "{w}", "s", stop.signal)[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual(hashed({ op: "current", instances: [] }));
    const now = Date.now();
    for (let i = 1; i <= MAX_QUEUED_CHANGES + 50; i++) await store.register("{w}", instance("s", "h", i, { ttlMs: 0 }, now), now);
    // no wait needed: each event is delivered in a microtask queued before its write's promise resolves
    const next = (await it.next()).value;
    expect(next?.op).toBe("resync");
    expect(next && "instances" in next && next.instances.length).toBe(MAX_QUEUED_CHANGES + 50);
    // and it keeps delivering after that
    await store.deregister("{w}", "s", "s@http#h#1", Date.now());
    expect((await it.next()).value).toEqual(hashed({ op: "deregister", instanceId: "s@http#h#1" }));
    stop.abort();
    expect((await it.next()).done).toBe(true);
  });

  it("a metadata change whose event arrives after an expiry re-read is still sent (the re-read takes only new ttls)", async () => {
    const store = createMemoryRegistryStore();
    // The change feed as it is on a loaded Redis: the metadata event reaches this process late.
    const slowFeed: typeof store = {
      ...store,
      subscribe: (onChange, onResync) => store.subscribe((c) => (c.op === "metadata" ? void setTimeout(() => onChange(c), 300) : onChange(c)), onResync),
    };
    const now = Date.now();
    await store.register("{m}", instance("s", "fixed", 1, { ttlMs: 0 }, now), now);
    await store.register("{m}", instance("s", "eph", 2, { ttlMs: 100 }, now), now); // its expiry makes the watch re-read
    const stop = new AbortController();
    const it = watchInstances(slowFeed, "{m}", "s", stop.signal)[Symbol.asyncIterator]();
    expect((await it.next()).value?.op).toBe("current");
    expect(await store.setMetadata("{m}", "s", "s@http#fixed#1", { zone: "b" }, Date.now())).toBe(true);
    expect((await it.next()).value).toEqual(hashed({ op: "expired", instanceId: "s@http#eph#2" })); // the re-read, before the event
    const next = (await it.next()).value;
    expect(next && next.op === "metadata" && next.instance.metadata).toEqual({ zone: "b" });
    stop.abort();
  });
});

describe("watchInstances: each event's hash, the digest of what the client holds after it", () => {
  it("is equal for equal states, whatever the order of the changes or the metadata's key order", async () => {
    const store = createMemoryRegistryStore();
    const stop = new AbortController();
    const watch = (ns: string) => watchInstances(store, ns, "s", stop.signal)[Symbol.asyncIterator]();
    const [one, two] = [watch("{h1}"), watch("{h2}")];
    const [empty1, empty2] = [(await one.next()).value!.hash, (await two.next()).value!.hash];
    expect(empty2).toBe(empty1);
    const a = instance("s", "a", 1, { ttlMs: 0, metadata: { x: "1", y: "2" } });
    const b = instance("s", "b", 2, { ttlMs: 0 });
    await store.register("{h1}", a, Date.now());
    await store.register("{h1}", b, Date.now());
    await store.register("{h2}", b, Date.now());
    await store.register("{h2}", { ...a, metadata: { y: "2", x: "1" } }, Date.now());
    const [afterA, bothOne] = [(await one.next()).value!.hash, (await one.next()).value!.hash];
    const [afterB, bothTwo] = [(await two.next()).value!.hash, (await two.next()).value!.hash];
    expect(new Set([empty1, afterA, afterB, bothOne]).size).toBe(4);
    expect(bothTwo).toBe(bothOne);
    await store.deregister("{h1}", "s", b.instanceId, Date.now());
    expect((await one.next()).value).toEqual(hashed({ op: "deregister", instanceId: b.instanceId, hash: afterA }));
    // and a new watch's first message names the same state
    const again = watch("{h1}");
    expect((await again.next()).value?.hash).toBe(afterA);
    stop.abort();
  });

  it("a renewal without an event is sent when the ttl the client holds passes, as a renew with the new ttl (the client never holds a ttl long past)", async () => {
    const store = createMemoryRegistryStore();
    const stop = new AbortController();
    const t0 = Date.now();
    const eph = instance("s", "eph", 1, { ttlMs: 600 }, t0);
    await store.register("{q}", eph, t0);
    const it = watchInstances(store, "{q}", "s", stop.signal)[Symbol.asyncIterator]();
    const held = (await it.next()).value!.hash;
    // renewed while more than half its ttl is left: no event then; the watch reads it again at the old ttl and sends it
    expect((await store.renew("{q}", "s", eph.instanceId, t0 + 250))?.ttlAt).toBe(t0 + 850);
    const renewed = (await it.next()).value!;
    expect(Date.now()).toBeGreaterThanOrEqual(t0 + 600);
    expect(renewed).toMatchObject({ op: "renew", instance: { instanceId: eph.instanceId, ttlAt: t0 + 850 } });
    expect(renewed.hash).not.toBe(held);
    // a new watch reads the same state: a client reconnecting with that hash skips "current"
    const fresh = watchInstances(store, "{q}", "s", stop.signal)[Symbol.asyncIterator]();
    expect((await fresh.next()).value?.hash).toBe(renewed.hash);
    // not renewed again: past its new ttl, it is reported expired
    expect((await it.next()).value).toMatchObject({ op: "expired", instanceId: eph.instanceId });
    expect(Date.now()).toBeGreaterThanOrEqual(t0 + 850);
    stop.abort();
  });
});

describe("watchInstances under expiry load", () => {
  it("20 watches of a 4,000-instance service: 400 spread expiries each delivered within a second, each instance read again once or twice for all", { timeout: 60_000 }, async () => {
    const store = createMemoryRegistryStore();
    let reads = 0;
    let instanceReads = 0;
    const counted: typeof store = {
      ...store,
      listInstances: (...a) => (reads++, store.listInstances(...a)),
      getInstance: (...a) => (instanceReads++, store.getInstance(...a)),
    };
    const now = Date.now();
    for (let i = 0; i < 3_600; i++) await store.register("{x}", instance("s", "fixed", i, { ttlMs: 0 }, now), now);
    const from = Date.now() + 1_000; // the watches start first: what expires before their first read is not theirs
    const ttlAt = new Map<string, number>();
    for (let i = 0; i < 400; i++) {
      const r = instance("s", "eph", i, { ttlMs: from - now + i * 5 }, now); // ttls spread over 2 s: 400 moments
      ttlAt.set(r.instanceId, r.ttlAt!);
      await store.register("{x}", r, now);
    }
    const stop = new AbortController();
    const expired = Array.from({ length: 20 }, () => new Set<string>());
    let latest = 0;
    const watches = expired.map(async (seen) => {
      for await (const e of watchInstances(counted, "{x}", "s", stop.signal)) {
        if (e.op !== "expired") continue;
        seen.add(e.instanceId);
        latest = Math.max(latest, Date.now() - ttlAt.get(e.instanceId)!);
      }
    });
    await vi.waitFor(() => expect(expired.map((s) => s.size)).toEqual(expired.map(() => 400)), { timeout: 30_000, interval: 50 });
    stop.abort();
    await Promise.all(watches);
    expect(latest).toBeLessThan(1_000);
    // 20 first reads of the whole service and no other: a step reads again only the instances whose ttl passed (a few
    // of 4,000), once for all 20 watches, or twice when the first read came just before the ttl. Before: 336 reads of
    // the whole service, then (shared) one per expiry step (100 ms), each scanned by every watch.
    expect(reads).toBe(20);
    expect(instanceReads).toBeGreaterThanOrEqual(400);
    expect(instanceReads).toBeLessThanOrEqual(2 * 400);
  });
});

describe("watchInstances: a sweep's expiries", () => {
  it("500 instances expired by one sweep reach a watch as 500 expired events, not as a resync of the service", async () => {
    const store = createMemoryRegistryStore();
    const now = Date.now();
    for (let i = 0; i < 500; i++) await store.register("{sw}", instance("s", "eph", i, { ttlMs: 60_000 }, now), now);
    await store.register("{sw}", instance("s", "fixed", 1, { ttlMs: 0 }, now), now);
    const stop = new AbortController();
    const it = watchInstances(store, "{sw}", "s", stop.signal)[Symbol.asyncIterator]();
    expect(((await it.next()).value as { instances: unknown[] }).instances).toHaveLength(501);
    expect(await store.sweep("{sw}", now + 60_000)).toBe(500); // every event arrives before the watch reads one
    const ops: string[] = [];
    while (ops.length < 500 && !ops.includes("resync")) ops.push((await it.next()).value!.op);
    expect(ops.filter((op) => op === "expired")).toHaveLength(500);
    stop.abort();
  });
});

describe("watchInstances: many watches of one service", () => {
  it("read each registered instance once for all 20 of them", async () => {
    const store = createMemoryRegistryStore();
    let reads = 0;
    const counted: typeof store = { ...store, getInstance: (...a) => (reads++, store.getInstance(...a)) };
    const stop = new AbortController();
    const registered = Array.from({ length: 20 }, () => new Set<string>());
    const watches = registered.map(async (seen) => {
      for await (const e of watchInstances(counted, "{many}", "s", stop.signal)) if (e.op === "register") seen.add(e.instance.instanceId);
    });
    await new Promise((r) => setTimeout(r, 20));
    const now = Date.now();
    for (let i = 0; i < 50; i++) {
      await store.register("{many}", instance("s", "h", i, { ttlMs: 0 }, now), now);
      await new Promise((r) => setTimeout(r, 2));
    }
    await vi.waitFor(() => expect(registered.map((s) => s.size)).toEqual(registered.map(() => 50)), { timeout: 5_000 });
    stop.abort();
    await Promise.all(watches);
    expect(reads).toBe(50); // not 20 × 50
  });
});
