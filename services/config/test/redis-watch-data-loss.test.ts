import { create } from "@bufbuild/protobuf";
import { createContextValues, type HandlerContext } from "@connectrpc/connect";
import { WatchConfigRequestSchema } from "@gov/api";
import { connectRedis } from "@gov/redis";
import { startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createConfigService } from "../src/config-service.js";
import { createRedisConfigStore } from "../src/store/redis-config-store.js";
import type { ConfigStore } from "../src/store/config-store.js";

const limits = { maxContentBytes: 1 << 20, maxZipBytes: 1 << 20, maxZipEntries: 10, maxZipUncompressedBytes: 1 << 20 };

/**
 * A Redis restarted without persistence comes back empty and counts versions from 1 again. What the watcher saw
 * before (version 3) must not make it take the new version 1 for "already seen".
 */
describe.skipIf(inject("redisSkipReason"))("a watch across a Redis restart that lost the data", () => {
  let redis: RedisServer;
  let store: ConfigStore;
  beforeAll(async () => {
    redis = await startRedis();
    store = await createRedisConfigStore(await connectRedis(redis.url), { maxVersions: 10, kind: "redis" });
  });
  afterAll(async () => {
    await store?.close();
    await redis?.stop();
  });

  it("sends the empty state on resync, then the new version 1 and everything after it", async () => {
    const impl = createConfigService({ store, namespaceRule: { requireHashTag: true }, limits });
    for (const [i, data] of ["one", "two", "three"].entries()) await store.set("{w}", "a", data, `h${i}`, i);
    const ac = new AbortController();
    const ctx = { signal: ac.signal, values: createContextValues() } as unknown as HandlerContext;
    const seen: { op: string; data?: string; version?: number }[] = [];
    const done = (async () => {
      for await (const m of impl.watchConfig(create(WatchConfigRequestSchema, { namespace: "{w}", configId: "a" }), ctx)) {
        seen.push({ op: m.op ?? "", data: m.config?.data, version: m.config?.version });
      }
    })();
    await expect.poll(() => seen.length).toBe(1);
    expect(seen[0]).toEqual({ op: "current", data: "three", version: 3 });

    await redis.stop();
    await redis.start(); // no persistence: empty
    await expect.poll(() => seen.length, { timeout: 15_000 }).toBe(2);
    expect(seen[1]).toEqual({ op: "resync", data: undefined, version: undefined });

    expect(await store.set("{w}", "a", "after", "h-after", 10)).toEqual({ changed: true, version: 1 });
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBe(3);
    expect(await store.set("{w}", "a", "after-2", "h-after-2", 11)).toEqual({ changed: true, version: 2 });
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBe(4);
    ac.abort();
    await done;
    expect(seen.slice(2)).toEqual([
      { op: "set", data: "after", version: 1 },
      { op: "set", data: "after-2", version: 2 },
    ]);
  });
});
