import { describe, expect, it } from "vitest";
import { ClockStalledError, CompositeIdGenerator, SnowflakeId } from "../src/index.js";
import { captureLogs } from "./helpers.js";

describe("sequence state stays consistent (no id issued twice)", () => {
  it("nextIdAsync() called many times at once: the timestamp is the one the sequence was taken in", async () => {
    const g = new SnowflakeId({ machine: 1, logger: captureLogs().logger });
    // 20,000 calls span several milliseconds (4,096 ids per ms at most): each id must keep its own tick
    const ids = await Promise.all(Array.from({ length: 20_000 }, () => g.nextIdAsync()));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("nextIdAsync() interleaved with synchronous nextId() across a tick issues no id twice", async () => {
    const g = new SnowflakeId({ machine: 1, logger: captureLogs().logger });
    let dups = 0;
    for (let round = 0; round < 50; round++) {
      const pending = g.nextIdAsync();
      const seen = new Set<bigint>();
      for (let i = 0; i < 5_000; i++) seen.add(g.nextId()); // crosses at least one tick (4,096 ids per ms)
      if (seen.has(await pending)) dups++;
    }
    expect(dups).toBe(0);
  });

  it("after ClockStalledError the next call in the same tick does not restart the sequence", () => {
    const t = 1_700_000_000_000;
    const clock = { now: () => t }; // a clock that does not advance for > 5 ms
    for (const make of [
      () => { const g = new SnowflakeId({ machine: 1, clock, logger: captureLogs().logger }); return () => String(g.nextId()); },
      () => { const g = new CompositeIdGenerator({ machine: 1, clock, logger: captureLogs().logger }); return () => g.nextIdAsString(); },
    ]) {
      const next = make();
      const ids: string[] = [];
      let stalled = 0;
      for (let i = 0; i < 70_000; i++) {
        try {
          ids.push(next());
        } catch (err) {
          expect(err).toBeInstanceOf(ClockStalledError);
          if (++stalled >= 3) break; // every further call in this tick must refuse too
        }
      }
      expect(stalled).toBe(3);
      expect(new Set(ids).size).toBe(ids.length);
    }
  });
});
