import { create } from "@bufbuild/protobuf";
import { createContextValues, type HandlerContext } from "@connectrpc/connect";
import { WatchConfigRequestSchema, type WatchConfigResponse } from "@gov/api";
import { describe, expect, it } from "vitest";
import { createConfigService } from "../src/config-service.js";
import { createMemoryConfigStore } from "../src/store/memory-config-store.js";
import type { ConfigChange, ConfigStore } from "../src/store/config-store.js";
import { MAX_QUEUED_EVENTS, watchChanges, type WatchEvent } from "../src/watch-changes.js";

const limits = { maxContentBytes: 1 << 20, maxZipBytes: 1 << 20, maxZipEntries: 10, maxZipUncompressedBytes: 1 << 20 };

/** Reads what is queued now, without waiting for more: stops at the first read that would block. */
async function drainQueued(it: AsyncIterator<WatchEvent>): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  for (;;) {
    const next = await Promise.race([it.next(), new Promise<"blocked">((r) => setImmediate(() => r("blocked")))]);
    if (next === "blocked" || next.done) return out;
    out.push(next.value);
  }
}

const versionsOf = (events: WatchEvent[], configId: string) =>
  events.filter((e): e is ConfigChange => e !== "resync" && e.configId === configId).map((e) => e.version);

describe("watchChanges holds a bounded number of unread events", () => {
  it("a reader that keeps up gets every change, in order", async () => {
    const store = createMemoryConfigStore({ maxVersions: 5 });
    const ac = new AbortController();
    const it = watchChanges(store, () => true, ac.signal)[Symbol.asyncIterator]();
    for (let v = 1; v <= MAX_QUEUED_EVENTS; v++) await store.set("{n}", "a", `v${v}`, `h${v}`, v);
    const events = await drainQueued(it);
    expect(versionsOf(events, "a")).toEqual(Array.from({ length: MAX_QUEUED_EVENTS }, (_, i) => i + 1));
    ac.abort();
    await it.next();
  });

  it("a reader that does not read keeps at most the newest unread change per config once the bound is passed", async () => {
    const store = createMemoryConfigStore({ maxVersions: 5 });
    const ac = new AbortController();
    const it = watchChanges(store, () => true, ac.signal)[Symbol.asyncIterator]();
    await store.set("{n}", "b", "b1", "hb1", 0);
    for (let v = 1; v <= 10_000; v++) await store.set("{n}", "a", `v${v}`, `h${v}`, v);
    await store.set("{n}", "c", "c1", "hc1", 0);
    const events = await drainQueued(it);
    expect(events.length).toBeLessThanOrEqual(MAX_QUEUED_EVENTS + 2);
    // Nothing newest is lost, and the order of configs by their newest change holds.
    expect(versionsOf(events, "a").at(-1)).toBe(10_000);
    expect(versionsOf(events, "b")).toEqual([1]);
    expect(versionsOf(events, "c")).toEqual([1]);
    expect(events.at(-1)).toMatchObject({ configId: "c" });
    ac.abort();
    await it.next();
  });

  it("a resync replaces the changes queued before it and comes before the ones after it", async () => {
    let resync: (() => void) | undefined;
    const inner = createMemoryConfigStore({ maxVersions: 5 });
    const store = { ...inner, subscribe: (l: (c: ConfigChange) => void, r?: () => void) => ((resync = r), inner.subscribe(l)) };
    const ac = new AbortController();
    const it = watchChanges(store, () => true, ac.signal)[Symbol.asyncIterator]();
    await store.set("{n}", "a", "v1", "h1", 1);
    await store.set("{n}", "a", "v2", "h2", 2);
    resync!();
    await store.set("{n}", "a", "v3", "h3", 3);
    const events = await drainQueued(it);
    expect(events).toEqual(["resync", { namespace: "{n}", configId: "a", op: "set", version: 3 }]);
    ac.abort();
    await it.next();
  });
});

describe("watchConfig on the embedded store", () => {
  const watch = (store: ConfigStore, ac: AbortController) => {
    const impl = createConfigService({ store, namespaceRule: { requireHashTag: true }, limits });
    const ctx = { signal: ac.signal, values: createContextValues() } as unknown as HandlerContext;
    return impl.watchConfig(create(WatchConfigRequestSchema, { namespace: "{n}", configId: "a" }), ctx)[Symbol.asyncIterator]();
  };
  const summary = (m: WatchConfigResponse) => ({ op: m.op, data: m.config?.data, version: m.config?.version });

  it("a slow watcher whose announced versions left the history gets the current state, never an empty 'set'", async () => {
    const store = createMemoryConfigStore({ maxVersions: 1 });
    const ac = new AbortController();
    const it = watch(store, ac);
    expect(summary((await it.next()).value as WatchConfigResponse)).toEqual({ op: "current", data: undefined, version: undefined });
    for (let v = 1; v <= 5; v++) await store.set("{n}", "a", `v${v}`, `h${v}`, v);
    // v1 is gone from a one-version history: its event carries what is there now, and the older events are then seen.
    expect(summary((await it.next()).value as WatchConfigResponse)).toEqual({ op: "set", data: "v5", version: 5 });
    await store.set("{n}", "a", "v6", "h6", 6);
    expect(summary((await it.next()).value as WatchConfigResponse)).toEqual({ op: "set", data: "v6", version: 6 });
    ac.abort();
  });

  it("the removal of an older version, read after its re-creation, does not hide the config", async () => {
    const inner = createMemoryConfigStore({ maxVersions: 5 });
    await inner.set("{n}", "a", "v1", "h1", 1);
    // The watch's first read waits until the remove (of v1) and the re-creation (v2) have happened and been announced.
    let openGate!: () => void;
    const gate = new Promise<void>((r) => (openGate = r));
    let reads = 0;
    const store = { ...inner, get: async (ns: string, id: string) => (reads++ === 0 && (await gate), inner.get(ns, id)) };
    const ac = new AbortController();
    const it = watch(store, ac);
    const first = it.next();
    await expect.poll(() => reads).toBe(1);
    await inner.remove("{n}", "a", 2);
    await inner.set("{n}", "a", "v2", "h2", 3);
    openGate();
    expect(summary((await first).value as WatchConfigResponse)).toEqual({ op: "current", data: "v2", version: 2 });
    await inner.set("{n}", "a", "v3", "h3", 4);
    const rest: ReturnType<typeof summary>[] = [];
    while (rest.at(-1)?.version !== 3) rest.push(summary((await it.next()).value as WatchConfigResponse));
    expect(rest).toEqual([{ op: "set", data: "v3", version: 3 }]);
    ac.abort();
  });

  it("a watcher too slow to keep every event still sees a config deleted with its namespace and made again", async () => {
    const store = createMemoryConfigStore({ maxVersions: 5 });
    const ac = new AbortController();
    const it = watch(store, ac);
    const next = async () => {
      const n = await Promise.race([it.next(), new Promise<"stuck">((r) => setTimeout(() => r("stuck"), 500))]);
      return n === "stuck" ? n : summary(n.value as WatchConfigResponse);
    };
    expect(await next()).toEqual({ op: "current", data: undefined, version: undefined });
    // The watcher keeps up with a config that reaches a high version.
    const high = MAX_QUEUED_EVENTS + 100;
    for (let v = 1; v <= high; v++) await store.set("{n}", "a", `v${v}`, `h${v}`, v);
    for (let m = await next(); m !== "stuck" && m.version !== high; m = await next());
    // Then it stops reading (a backed-up SSE socket) while the namespace is deleted (force) and the config written again,
    // more often than a watch keeps events for: numbering starts at 1 again, and the remove is among the events dropped.
    await store.deleteNamespace("{n}");
    const again = MAX_QUEUED_EVENTS + 10;
    for (let v = 1; v <= again; v++) await store.set("{n}", "a", `w${v}`, `hw${v}`, v);
    await new Promise((r) => setImmediate(r)); // the store's events are delivered
    let last: Awaited<ReturnType<typeof next>> | undefined;
    for (let m = await next(); m !== "stuck"; m = await next()) last = m;
    // Whatever it skipped on the way, the watcher ends with the state as it is.
    expect(last).toEqual({ op: expect.any(String), data: `w${again}`, version: again });
    ac.abort();
  });
});

describe("a watch that ends before its change loop", () => {
  /** The embedded store, counting its live subscriptions (what every change is delivered to). */
  function countingStore(): { store: ConfigStore; live: () => number } {
    const store = createMemoryConfigStore({ maxVersions: 5 });
    const subscribe = store.subscribe.bind(store);
    let live = 0;
    store.subscribe = (onChange, onResync) => {
      live++;
      const unsubscribe = subscribe(onChange, onResync);
      let done = false;
      return () => {
        if (!done) live--;
        done = true;
        unsubscribe();
      };
    };
    return { store, live: () => live };
  }
  const watch = (store: ConfigStore, ac: AbortController) => {
    const impl = createConfigService({ store, namespaceRule: { requireHashTag: true }, limits });
    const ctx = { signal: ac.signal, values: createContextValues() } as unknown as HandlerContext;
    return impl.watchConfig(create(WatchConfigRequestSchema, { namespace: "{n}", configId: "a" }), ctx)[Symbol.asyncIterator]();
  };

  it("leaves no subscription behind when the consumer stops after the first message (HEAD, a cancel)", async () => {
    const { store, live } = countingStore();
    for (let i = 0; i < 3; i++) {
      const it = watch(store, new AbortController());
      expect((await it.next()).value).toMatchObject({ op: "current" });
      await it.return!(undefined);
    }
    expect(live()).toBe(0);
  });

  it("leaves no subscription behind when the first read fails (store down)", async () => {
    const { store, live } = countingStore();
    store.get = async () => {
      throw new Error("store down");
    };
    await expect(watch(store, new AbortController()).next()).rejects.toThrow("store down");
    expect(live()).toBe(0);
  });
});
