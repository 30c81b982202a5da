import { describe, expect, it } from "vitest";
import { createConfigReadCache } from "../src/store/config-read-cache.js";
import type { ConfigRecord } from "../src/store/config-store.js";

const rec = (data: string, version = 1): ConfigRecord => ({ configId: "c", data, hash: "h", version, createTime: 1 });
const key = (namespace: string, configId: string) => [namespace, configId] as const;

/** The read cache of the Redis store, on its own: the staleness guard and the bounds. */
describe("config read cache (used by the Redis config store)", () => {
  const live = (opts = {}) => {
    const cache = createConfigReadCache(opts);
    cache.clear(true); // as when the change subscription becomes live
    return cache;
  };
  const read = (cache: ReturnType<typeof live>, k: readonly [string, string], value: ConfigRecord | null) => cache.end(cache.begin(...k), value);

  it("caches records and absence, and hands out frozen shared records", () => {
    const cache = live();
    const k = key("{ns}", "a");
    read(cache, k, rec("one"));
    read(cache, key("{ns}", "gone"), null);
    const hit = cache.lookup(...k)!;
    expect(hit.data).toBe("one");
    expect(() => {
      hit.data = "mutated by a caller";
    }).toThrow(TypeError); // frozen: a caller cannot corrupt what others read
    expect(cache.lookup(...k)).toBe(hit);
    expect(cache.lookup(...k)?.data).toBe("one");
    expect(cache.lookup(...key("{ns}", "gone"))).toBeNull();
    expect(cache.lookup(...key("{ns}", "never read"))).toBeUndefined();
  });

  it("a read that started before an invalidation of its key does not store its (old) result", () => {
    const cache = live();
    const k = key("{ns}", "a");
    const slow = cache.begin(...k); // read sent to Redis ...
    cache.invalidate(...k); // ... a change event arrives before its reply
    cache.end(slow, rec("old"));
    expect(cache.lookup(...k)).toBeUndefined();
    read(cache, k, rec("new", 2)); // a read that started after the invalidation may store
    expect(cache.lookup(...k)?.version).toBe(2);
  });

  it("an invalidation of another key does not block caching", () => {
    const cache = live();
    const k = key("{ns}", "a");
    const t = cache.begin(...k);
    cache.invalidate(...key("{ns}", "b"));
    cache.end(t, rec("one"));
    expect(cache.lookup(...k)?.data).toBe("one");
  });

  it("caches nothing until enabled, and a clear drops reads in flight", () => {
    const cache = createConfigReadCache();
    const k = key("{ns}", "a");
    read(cache, k, rec("one"));
    expect(cache.lookup(...k)).toBeUndefined(); // subscription not live yet
    cache.clear(true);
    const t = cache.begin(...k);
    cache.clear(true); // the subscription dropped and came back meanwhile
    cache.end(t, rec("one"));
    expect(cache.lookup(...k)).toBeUndefined();
    read(cache, k, rec("one"));
    cache.clear(false);
    expect(cache.lookup(...k)).toBeUndefined();
  });

  it("says whether an invalidation in a namespace could change anything (else its change event is not decoded)", () => {
    const cache = live();
    expect(cache.concerns("{ns}")).toBe(false);
    read(cache, key("{ns}", "a"), rec("one"));
    expect(cache.concerns("{ns}")).toBe(true);
    expect(cache.concerns("{other}")).toBe(false);
    const t = cache.begin(...key("{third}", "b"));
    expect(cache.concerns("{other}")).toBe(true); // a read in flight must hear of every invalidation
    cache.end(t);
    cache.invalidate(...key("{ns}", "a"));
    expect(cache.concerns("{ns}")).toBe(false);
  });

  it("keys stay distinct whatever the namespace and id contain", () => {
    const cache = live();
    read(cache, key("{a}:", "b"), rec("one"));
    expect(cache.lookup(...key("{a}", ":b"))).toBeUndefined();
    expect(cache.lookup(...key("{a}:", "b"))?.data).toBe("one");
  });

  it("evicts entries not used since they were stored (second chance) beyond maxEntries and maxBytes", () => {
    const cache = live({ maxEntries: 3, maxBytes: 9_100 });
    for (const id of ["a", "b", "c"]) read(cache, key("n", id), rec(id));
    cache.lookup(...key("n", "a")); // a was used since it was stored: eviction spares it once
    read(cache, key("n", "d"), rec("d"));
    expect(cache.lookup(...key("n", "b"))).toBeUndefined();
    expect(cache.size).toBe(3);
    read(cache, key("n", "big"), rec("x".repeat(9_000)));
    expect(cache.size).toBe(1); // the others had to go to stay under maxBytes
    read(cache, key("n", "huge"), rec("x".repeat(20_000)));
    expect(cache.lookup(...key("n", "huge"))).toBeUndefined(); // larger than the whole budget: never cached
  });
});
