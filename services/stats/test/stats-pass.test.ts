import { createMemoryRegistryStore } from "@gov/registry-service";
import { describe, expect, it } from "vitest";
import { createMemoryStatsStore } from "../src/stats/stats-store.js";
import { runStatsPass } from "../src/worker/stats-pass.js";

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
