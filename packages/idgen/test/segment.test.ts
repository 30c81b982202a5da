import diagnostics_channel from "node:diagnostics_channel";
import { describe, expect, it } from "vitest";
import { memorySegmentDistributor, SegmentChainId, SegmentExhaustedError, toStringConverter } from "../src/index.js";
import { captureLogs, waitUntil } from "./helpers.js";

/** Burst: synchronous ids, awaiting only when the chain ran dry. */
async function burst(chain: SegmentChainId, n: number): Promise<number[]> {
  const ids: number[] = [];
  while (ids.length < n) {
    try {
      ids.push(chain.nextId());
    } catch (err) {
      if (!(err instanceof SegmentExhaustedError)) throw err;
      ids.push(await chain.nextIdAsync());
    }
  }
  return ids;
}

describe("SegmentChainId (memory distributor)", () => {
  it("starts at offset + 1 and issues consecutive ids; describe() shows the current segment", async () => {
    const chain = await SegmentChainId.create({
      distributor: memorySegmentDistributor({ namespace: "svc", name: "order", offset: 1000 }),
      converter: toStringConverter(),
      logger: captureLogs().logger,
    });
    expect([chain.nextId(), chain.nextId(), chain.nextId()]).toEqual([1001, 1002, 1003]);
    expect(chain.nextIdAsString()).toBe("1004");
    const d = chain.describe();
    expect(d.kind).toBe("SegmentChainId");
    expect(d.converter.kind).toBe("ToStringIdConverter");
    expect(d.state.currentSegment).toMatchObject({ offset: 1000, maxId: 1010, sequence: 1004, step: 10, available: true });
    expect(chain.name).toBe("svc.order");
    chain.stop();
  });

  it("under a burst logs the hunger expansion, then shrinks back; ids strictly increase with no gaps", async () => {
    const logs = captureLogs();
    const appended: { offset: number; maxId: number }[] = [];
    const onPrefetch = (m: unknown) => {
      const e = m as { name: string; event: string; offset: number; maxId: number };
      if (e.name === "svc.burst" && e.event === "appended") appended.push({ offset: e.offset, maxId: e.maxId });
    };
    diagnostics_channel.subscribe("gov:idgen:prefetch", onPrefetch);
    const chain = await SegmentChainId.create({
      distributor: memorySegmentDistributor({ namespace: "svc", name: "burst" }),
      step: 10,
      safeDistance: 2,
      prefetchPeriodMs: 20,
      hungerWindowMs: 100,
      logger: logs.logger,
    });
    const ids = await burst(chain, 200_000);
    // one process, one distributor: exactly 1..N, so no id skipped inside any segment
    const firstMismatch = ids.findIndex((id, i) => id !== i + 1);
    expect(firstMismatch).toBe(-1);
    const hunger = logs.find("info", "Prefetch [svc.burst] - Hunger, Safety distance expansion");
    expect(hunger.length).toBeGreaterThanOrEqual(3);
    expect(hunger[0]).toMatchObject({ from: 2, to: 4 });
    expect(chain.describe().state.prefetchDistance).toBeGreaterThan(2);
    expect(appended.length).toBeGreaterThan(1);
    await waitUntil("shrink back to the safe distance", () => chain.describe().state.prefetchDistance === 2, 5_000);
    expect(logs.find("info", "Prefetch [svc.burst] - Full, Safety distance shrinks").length).toBeGreaterThanOrEqual(1);
    diagnostics_channel.unsubscribe("gov:idgen:prefetch", onPrefetch);
    chain.stop();
  });

  it("keeps serving reserved ids while the store fails, then fails clearly", async () => {
    const logs = captureLogs();
    let failing = false;
    const base = memorySegmentDistributor({ namespace: "svc", name: "flaky" });
    const chain = await SegmentChainId.create({
      // a store that can be switched off (the distributor interface is public: users plug their own stores)
      distributor: { ...base, nextMaxId: (n) => (failing ? Promise.reject(new Error("store down")) : base.nextMaxId(n)) },
      step: 10,
      safeDistance: 3,
      prefetchPeriodMs: 10,
      failureBackoffMs: 5,
      logger: logs.logger,
    });
    failing = true;
    const runway = chain.runway;
    const served: number[] = [];
    for (let i = 0; i < 11; i++) served.push(chain.nextId()); // into the second segment: below the safe distance
    // the background prefetch now fails repeatedly while we still have reserved ids
    await waitUntil("two failed prefetches", () => (chain.describe().state.prefetchFailures as number) >= 2);
    let error: unknown;
    while (!error) {
      try {
        served.push(chain.nextId());
      } catch (e) {
        error = e;
      }
    }
    expect(served.length).toBe(runway);
    expect(error).toBeInstanceOf(SegmentExhaustedError);
    expect((error as Error).message).toContain("store down");
    expect(logs.find("error", "AppendChain [svc.flaky] - prefetch failed")).toHaveLength(1);
    expect(logs.find("warn", "prefetch still failing").length).toBeGreaterThanOrEqual(1);
    expect(chain.describe().state).toMatchObject({ runway: 0, lastPrefetchError: "Error: store down" });
    // callers hitting the dry chain during the outage are no hunger: the distance stays, and no "Hunger" line blames the step
    for (let i = 0; i < 8; i++) {
      const failures = chain.describe().state.prefetchFailures as number;
      expect(() => chain.nextId()).toThrow(SegmentExhaustedError);
      await waitUntil("another failed prefetch", () => (chain.describe().state.prefetchFailures as number) > failures);
    }
    expect(chain.describe().state.prefetchDistance).toBeLessThanOrEqual(6); // at most one doubling (before the first failure)
    expect(logs.find("info", "Prefetch [svc.flaky] - Hunger, Safety distance expansion").length).toBeLessThanOrEqual(1);
    failing = false;
    expect(await chain.nextIdAsync()).toBe(served[served.length - 1] + 1);
    expect(logs.find("info", "AppendChain [svc.flaky] - prefetch recovered")).toHaveLength(1);
    chain.stop();
  });
});
