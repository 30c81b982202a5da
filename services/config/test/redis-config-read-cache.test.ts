import { describe, expect, it } from "vitest";
import { createConfigReadCache } from "../src/store/config-read-cache.js";
import type { ConfigRecord } from "../src/store/config-store.js";

const rec = (data: string, version = 1): ConfigRecord => ({ configId: "c", data, hash: "h", version, createTime: 1 });

/** The read cache of the Redis store, on its own: the staleness guard and the bounds. */
describe("config read cache (used by the Redis config store)", () => {
  const live = (opts = {}) => {
    const cache = createConfigReadCache(opts);
    cache.clear(true); // as when the change subscription becomes live
    return cache;
  };
  const read = (cache: ReturnType<typeof live>, key: string, value: ConfigRecord | null) => cache.end(cache.begin(key), value);

  it("caches records and absence, and hands out frozen shared records", () => {
    const cache = live();
    const k = cache.keyOf("{ns}", "a");
    read(cache, k, rec("one"));
    read(cache, cache.keyOf("{ns}", "gone"), null);
    const hit = cache.lookup(k)!;
    expect(hit.data).toBe("one");
    expect(() => {
      hit.data = "mutated by a caller";
    }).toThrow(TypeError); // frozen: a caller cannot corrupt what others read
    expect(cache.lookup(k)).toBe(hit);
    expect(cache.lookup(k)?.data).toBe("one");
    expect(cache.lookup(cache.keyOf("{ns}", "gone"))).toBeNull();
    expect(cache.lookup(cache.keyOf("{ns}", "never read"))).toBeUndefined();
  });

  it("a read that started before an invalidation of its key does not store its (old) result", () => {
    const cache = live();
    const k = cache.keyOf("{ns}", "a");
    const slow = cache.begin(k); // read sent to Redis ...
    cache.invalidate(k); // ... a change event arrives before its reply
    cache.end(slow, rec("old"));
    expect(cache.lookup(k)).toBeUndefined();
    read(cache, k, rec("new", 2)); // a read that started after the invalidation may store
    expect(cache.lookup(k)?.version).toBe(2);
  });

  it("an invalidation of another key does not block caching", () => {
    const cache = live();
    const k = cache.keyOf("{ns}", "a");
    const t = cache.begin(k);
    cache.invalidate(cache.keyOf("{ns}", "b"));
    cache.end(t, rec("one"));
    expect(cache.lookup(k)?.data).toBe("one");
  });

  it("caches nothing until enabled, and a clear drops reads in flight", () => {
    const cache = createConfigReadCache();
    const k = cache.keyOf("{ns}", "a");
    read(cache, k, rec("one"));
    expect(cache.lookup(k)).toBeUndefined(); // subscription not live yet
    cache.clear(true);
    const t = cache.begin(k);
    cache.clear(true); // the subscription dropped and came back meanwhile
    cache.end(t, rec("one"));
    expect(cache.lookup(k)).toBeUndefined();
    read(cache, k, rec("one"));
    cache.clear(false);
    expect(cache.lookup(k)).toBeUndefined();
  });

  it("keys stay distinct whatever the namespace and id contain", () => {
    const cache = live();
    expect(cache.keyOf("{a}:", "b")).not.toBe(cache.keyOf("{a}", ":b"));
  });

  it("evicts the least recently used entries beyond maxEntries and maxBytes", () => {
    const cache = live({ maxEntries: 3, maxBytes: 9_100 });
    for (const id of ["a", "b", "c"]) read(cache, cache.keyOf("n", id), rec(id));
    cache.lookup(cache.keyOf("n", "a")); // a is now the most recent
    read(cache, cache.keyOf("n", "d"), rec("d"));
    expect(cache.lookup(cache.keyOf("n", "b"))).toBeUndefined();
    expect(cache.size).toBe(3);
    read(cache, cache.keyOf("n", "big"), rec("x".repeat(9_000)));
    expect(cache.size).toBe(1); // the others had to go to stay under maxBytes
    read(cache, cache.keyOf("n", "huge"), rec("x".repeat(20_000)));
    expect(cache.lookup(cache.keyOf("n", "huge"))).toBeUndefined(); // larger than the whole budget: never cached
  });
});
