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
});
