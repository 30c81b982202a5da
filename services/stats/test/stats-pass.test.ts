import { createMemoryRegistryStore } from "@gov/registry-service";
import { describe, expect, it } from "vitest";
import { createMemoryStatsStore } from "../src/stats/stats-store.js";
import { runStatsPass } from "../src/worker/stats-pass.js";
import { statsStoreTargets } from "./stats-harness.js";

describe("runStatsPass on the embedded store", () => {
  it("gives other work turns while it visits 2,000 namespaces (the store itself never does), and counts every one", async () => {
    const registry = createMemoryRegistryStore();
    const stats = createMemoryStatsStore();
    const namespaces = Array.from({ length: 2000 }, (_, i) => `{ns-${i}}`);
    const now = Date.now();
    for (const ns of namespaces.slice(0, 50)) await registry.putService(ns, "s");
    let writes = 0;
    const counting = { write: (...a: Parameters<typeof stats.write>) => (writes++, stats.write(...a)), retain: stats.retain };
    // Other work queued as the pass starts: it must run before the pass has visited every namespace.
    let writesWhenOtherWorkRan: number | undefined;
    setImmediate(() => (writesWhenOtherWorkRan = writes));
    const result = await runStatsPass({
      namespaces: { list: async () => namespaces, current: async () => namespaces[0] },
      registry,
      configs: { count: async () => 0 },
      topology: { prune: async () => 0 },
      stats: counting,
      edgeTtlMs: 60_000,
      now: () => now,
    });
    expect(result.namespaces).toBe(2000);
    expect(writes).toBe(2000);
    expect(writesWhenOtherWorkRan).toBeDefined();
    expect(writesWhenOtherWorkRan!).toBeLessThan(2000);
    // within the first turn's worth: 64 visits, plus those of the other lanes already under way
    expect(writesWhenOtherWorkRan!).toBeLessThanOrEqual(64 + 16);
  });
});

describe("a namespace deleted while a pass counts it", () => {
  const targets = statsStoreTargets("dp");
  for (const t of targets) {
    it.skipIf(t.skip)(`reads zeros once the delete answered, not the counts the pass read before it (${t.name} store)`, async () => {
      const { store: stats, close } = await t.open();
      try {
        const ns = `{dp${process.pid}x${Date.now()}}`;
        const passAt = Date.now() - 1;
        const result = await runStatsPass({
          namespaces: { list: async () => [ns], current: async () => ns },
          registry: createMemoryRegistryStore(),
          // the pass has read 12 configs; the namespace's delete (DELETE …?force=true) completes before the pass writes
          configs: { count: async () => (await stats.forget(ns), 12) },
          topology: { prune: async () => 0 },
          stats,
          edgeTtlMs: 60_000,
          now: () => passAt,
          passAt,
        });
        expect(result.namespaces).toBe(1);
        expect(await stats.read(ns)).toBeUndefined(); // it read {configs: 12, …} until the next pass
        // the namespace created again and counted by a later pass reads that pass's counts
        await stats.write(ns, { namespaces: 1, services: { total: 0, health: 0 }, instances: 0, configs: 1 }, Date.now() + 1, Date.now());
        expect((await stats.read(ns))?.configs).toBe(1);
        // and a pass that no longer lists it drops what the delete left behind
        await stats.forget(ns);
        expect(await stats.retain([])).toBeGreaterThanOrEqual(1);
      } finally {
        close();
      }
    });
  }
});
