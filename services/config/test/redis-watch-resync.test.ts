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

/** Pub/Sub does not replay what was published while a subscriber was away; a watch must say so instead of going quiet. */
describe.skipIf(inject("redisSkipReason"))("a watch across a Redis restart", () => {
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

  it("sends op 'resync' with the current state once the event feed is back", async () => {
    const impl = createConfigService({ store, namespaceRule: { requireHashTag: true }, limits });
    await store.set("{w}", "a", "before", "h1", 1);
    const ac = new AbortController();
    const ctx = { signal: ac.signal, values: createContextValues() } as unknown as HandlerContext;
    const seen: { op: string; data?: string }[] = [];
    const done = (async () => {
      for await (const m of impl.watchConfig(create(WatchConfigRequestSchema, { namespace: "{w}", configId: "a" }), ctx)) {
        seen.push({ op: m.op!, data: m.config?.data });
      }
    })();
    await expect.poll(() => seen.length).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 300));
    expect(seen).toEqual([{ op: "current", data: "before" }]);
    await redis.stop();
    await redis.start(); // empty: the config is gone, and no event said so
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBe(2);
    ac.abort();
    await done;
    expect(seen).toEqual([
      { op: "current", data: "before" },
      { op: "resync", data: undefined },
    ]);
  });
});
