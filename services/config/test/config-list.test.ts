// ListConfigs of a namespace with 100,000 configs: the stores read the whole id set and sorted it in one piece
// (Array.prototype.sort of 100,000 ids: 30–130 ms), during which the process answered nothing else (contract §3: no
// request may block the event loop for more than ~50 ms). The ZIP export starts with the same listing.
import type { ListConfigsResponse } from "@gov/api";
import { connectRedis } from "@gov/redis";
import { redisTargets, shuffledConfigIds, stallMonitor } from "@gov/testkit";
import { describe, expect, it } from "vitest";
import { createConfigService } from "../src/config-service.js";
import type { ConfigStore } from "../src/store/config-store.js";
import { createMemoryConfigStore } from "../src/store/memory-config-store.js";
import { createRedisConfigStore } from "../src/store/redis-config-store.js";
import { configKeys } from "../src/store/redis-config-scripts.js";
import { freshNamespace } from "./config-store.contract.js";

const LIMITS = { maxContentBytes: 1024 * 1024, maxZipBytes: 16 << 20, maxZipEntries: 1000, maxZipUncompressedBytes: 64 << 20 };
const CONFIGS = 100_000;

/** Lists the configs of `ns` through the service, and the longest stall of the event loop meanwhile. */
async function listTimed(store: ConfigStore, ns: string) {
  const service = createConfigService({ store, namespaceRule: { requireHashTag: true }, limits: LIMITS });
  const stalls = stallMonitor();
  const { configIds } = (await service.listConfigs({ namespace: ns } as never, {} as never)) as ListConfigsResponse;
  return { configIds, stallMs: stalls.stop() };
}

describe("ListConfigs of a 100,000-config namespace", () => {
  const ids = shuffledConfigIds(CONFIGS);
  const sorted = ids.toSorted();

  it("lists them sorted without blocking the event loop (embedded)", async () => {
    const store = createMemoryConfigStore({ maxVersions: 10 });
    for (const id of ids) await store.set("{dev}", id, "x", "h", 1_000);
    await store.remove("{dev}", ids[7], 2_000); // a removed config keeps its entry (history) but is not listed
    const { configIds, stallMs } = await listTimed(store, "{dev}");
    expect(configIds).toEqual(sorted.filter((id) => id !== ids[7]));
    // the contract's ~50 ms (stallMonitor counts only this thread's time on a CPU); it was 59–75 ms, now 16–20 ms
    expect(stallMs).toBeLessThan(50);
  }, 60_000);

  for (const target of redisTargets()) {
    it.skipIf(target.skip)(`lists them sorted without blocking the event loop (${target.name})`, async () => {
      const ns = freshNamespace();
      const raw = await connectRedis(target.url);
      const store = await createRedisConfigStore(await connectRedis(target.url), { maxVersions: 10 });
      try {
        // The index as 100,000 writes would leave it, written in a few steps (the listing reads only the index).
        const [idx] = configKeys(ns, "");
        for (let i = 0; i < ids.length; i += 10_000) await raw.sadd(idx, ...ids.slice(i, i + 10_000));
        const { configIds, stallMs } = await listTimed(store, ns);
        expect(configIds).toEqual(sorted);
        // What is left in one piece is ioredis decoding the one 100,000-id SMEMBERS reply: 20–45 ms idle, and as with
        // the LRANGE of config-versions-list (53 ms under CI's load against 24–35 idle) more on a loaded machine. Now
        // 22–57 ms; it was 52–64 ms before the sort was made in turns, so this bound guards the answer and against
        // worse, not the sort itself (the embedded variant and config-list-stall's whole GET fail on one-piece sorting).
        expect(stallMs).toBeLessThan(80);
      } finally {
        await Promise.all([store.close(), raw.quit()]);
      }
    }, 60_000);
  }
});
