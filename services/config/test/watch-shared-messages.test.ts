import { create } from "@bufbuild/protobuf";
import { createContextValues, type HandlerContext } from "@connectrpc/connect";
import { SetConfigRequestSchema, WatchConfigRequestSchema, type WatchConfigResponse } from "@gov/api";
import { connectRedis } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { describe, expect, it } from "vitest";
import { createConfigService } from "../src/config-service.js";
import { createMemoryConfigStore } from "../src/store/memory-config-store.js";
import { createRedisConfigStore } from "../src/store/redis-config-store.js";
import type { ConfigStore } from "../src/store/config-store.js";

const limits = { maxContentBytes: 1 << 20, maxZipBytes: 1 << 20, maxZipEntries: 10, maxZipUncompressedBytes: 1 << 20 };

const targets: { name: string; skip: string; open: (maxVersions?: number) => Promise<ConfigStore> }[] = [
  { name: "embedded", skip: "", open: async (maxVersions = 10) => createMemoryConfigStore({ maxVersions }) },
  ...redisTargets().map((t) => ({ name: t.name, skip: t.skip, open: async (maxVersions = 10) => createRedisConfigStore(await connectRedis(t.url), { maxVersions, kind: t.name as "redis" }) })),
];

/**
 * The watchers of one config get every change of a burst, and the same message for each: the gateway serializes a message once (its
 * texts go by identity), so a large config's change to many watchers costs one serialization, not one per watcher
 * (300 SSE watchers of a 1 MiB config held the event loop for over a second).
 */
for (const target of targets) {
  describe.skipIf(target.skip)(`watchers of one config on the ${target.name} store`, () => {
    it("get the very same message for each change", async () => {
      const store = await target.open();
      const impl = createConfigService({ store, namespaceRule: { requireHashTag: true }, limits });
      const ns = `{shared${Date.now()}}`;
      await store.set(ns, "a", "v1", "h1", 1);
      const ac = new AbortController();
      const ctx = { signal: ac.signal, values: createContextValues() } as unknown as HandlerContext;
      const received: WatchConfigResponse[][] = [[], [], []];
      const watchers = received.map(async (into) => {
        for await (const m of impl.watchConfig(create(WatchConfigRequestSchema, { namespace: ns, configId: "a" }), ctx)) into.push(m as WatchConfigResponse);
      });
      try {
        await expect.poll(() => received.every((r) => r.length === 1)).toBe(true);
        await store.set(ns, "a", "v2", "h2", 2);
        await expect.poll(() => received.every((r) => r.length === 2), { timeout: 5_000 }).toBe(true);
        expect(received.map((r) => r[1].config?.data)).toEqual(["v2", "v2", "v2"]);
        expect(received[1][1]).toBe(received[0][1]);
        expect(received[2][1]).toBe(received[0][1]);
      } finally {
        ac.abort();
        await Promise.allSettled(watchers);
        await store.close();
      }
    });

    it("a burst of 300 writes from 4 writers reaches every watcher whole, in order (64 were dropped per burst on Redis)", async () => {
      const store = await target.open(1000); // the history holds the whole burst: what is tested is the watch
      const impl = createConfigService({ store, namespaceRule: { requireHashTag: true }, limits });
      const ns = `{burst${Date.now()}}`;
      const ac = new AbortController();
      const ctx = { signal: ac.signal, values: createContextValues() } as unknown as HandlerContext;
      const versions: number[][] = [[], [], []];
      const watchers = versions.map(async (into) => {
        for await (const m of impl.watchConfig(create(WatchConfigRequestSchema, { namespace: ns, configId: "b" }), ctx)) into.push(m.config?.version ?? 0);
      });
      try {
        await expect.poll(() => versions.every((v) => v.length === 1)).toBe(true); // "current": absent
        let next = 0;
        const writer = async () => {
          while (next < 300) {
            const i = next++;
            await impl.setConfig(create(SetConfigRequestSchema, { namespace: ns, configId: "b", data: `d${i}` }), ctx);
          }
        };
        await Promise.all([writer(), writer(), writer(), writer()]);
        const all = Array.from({ length: 300 }, (_, i) => i + 1);
        await expect.poll(() => versions.map((v) => v.slice(1)), { timeout: 20_000 }).toEqual([all, all, all]);
      } finally {
        ac.abort();
        await Promise.allSettled(watchers);
        await store.close();
      }
    });
  });
}
