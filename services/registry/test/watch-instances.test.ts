import { describe, expect, it } from "vitest";
import { createMemoryRegistryStore } from "../src/store/memory-registry-store.js";
import { MAX_QUEUED_CHANGES, watchInstances } from "../src/watch-instances.js";
import { instance } from "./registry-store.contract.js";

describe("watchInstances", () => {
  it("a watcher that falls more than MAX_QUEUED_CHANGES behind gets one resync with the state as it is now", async () => {
    const store = createMemoryRegistryStore();
    const stop = new AbortController();
    const it = watchInstances(store, "{w}", "s", stop.signal)[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual({ op: "current", instances: [] });
    const now = Date.now();
    for (let i = 1; i <= MAX_QUEUED_CHANGES + 50; i++) await store.register("{w}", instance("s", "h", i, { ttlMs: 0 }, now), now);
    // no wait needed: each event is delivered in a microtask queued before its write's promise resolves
    const next = (await it.next()).value;
    expect(next?.op).toBe("resync");
    expect(next && "instances" in next && next.instances.length).toBe(MAX_QUEUED_CHANGES + 50);
    // and it keeps delivering after that
    await store.deregister("{w}", "s", "s@http#h#1", Date.now());
    expect((await it.next()).value).toEqual({ op: "deregister", instanceId: "s@http#h#1" });
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
    expect((await it.next()).value).toEqual({ op: "expired", instanceId: "s@http#eph#2" }); // the re-read, before the event
    const next = (await it.next()).value;
    expect(next && next.op === "metadata" && next.instance.metadata).toEqual({ zone: "b" });
    stop.abort();
  });
});
