import diagnostics_channel from "node:diagnostics_channel";
import { describe, expect, it } from "vitest";
import {
  ClockBackwardsException,
  ClockTooManyBackwardsException,
  InvalidSettingError,
  MachineIdLostException,
  MachineLease,
  manualDistributor,
  parseSnowflake,
  SafeSnowflakeId,
  SnowflakeId,
  stopAfterMs,
  TimestampOverflowException,
} from "../src/index.js";
import { captureLogs, manualMonotonic, shiftableClock } from "./helpers.js";

describe("SnowflakeId (41/10/12, bigint)", () => {
  it("issues 500,000 unique, strictly increasing ids that carry the machine id", () => {
    const { logger } = captureLogs();
    const g = new SnowflakeId({ machine: 513, logger });
    let prev = -1n;
    for (let i = 0; i < 500_000; i++) {
      const id = g.nextId();
      if (id <= prev) throw new Error(`id ${id} not above ${prev} at ${i}`);
      prev = id;
    }
    const p = parseSnowflake(prev, g.layout);
    expect(p.machineId).toBe(513);
    expect(Math.abs(p.timestamp - Date.now())).toBeLessThan(5_000);
    expect(g.generatedCount).toBe(500_000);
  });

  it("follows the sequence policy: first id has sequence 1, reset on a new tick only past half the range", () => {
    const clock = { t: 1_700_000_000_000, now() { return this.t; } };
    const g = new SnowflakeId({ machine: 1, clock, logger: captureLogs().logger });
    expect(parseSnowflake(g.nextId(), g.layout).sequence).toBe(1);
    clock.t++;
    expect(parseSnowflake(g.nextId(), g.layout).sequence).toBe(2); // new tick, below threshold: keeps counting
    for (let i = 0; i < 2046; i++) g.nextId(); // sequence now 2048 ≥ 2047
    clock.t++;
    expect(parseSnowflake(g.nextId(), g.layout).sequence).toBe(1);
  });

  it("waits for the next millisecond when 4096 ids are used up within one tick", () => {
    const g = new SnowflakeId({ machine: 2, logger: captureLogs().logger });
    const ids = Array.from({ length: 20_000 }, () => g.nextId());
    const perTick = new Map<number, number>();
    for (const id of ids) {
      const t = parseSnowflake(id, g.layout).timestamp;
      perTick.set(t, (perTick.get(t) ?? 0) + 1);
    }
    expect(Math.max(...perTick.values())).toBeLessThanOrEqual(4096);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("rejects a machine id that does not fit the layout", () => {
    expect(() => new SnowflakeId({ machine: 1024 })).toThrow(InvalidSettingError);
  });

  it("throws TimestampOverflowException when now − epoch exceeds the timestamp bits", () => {
    const g = new SnowflakeId({ machine: 1, layout: { timestampBit: 10, epoch: 0 }, logger: captureLogs().logger });
    expect(() => g.nextId()).toThrow(TimestampOverflowException);
  });

  it("describe() exposes kind, converter and {machineId, lastTimestamp}", () => {
    const g = new SnowflakeId({ machine: 7, logger: captureLogs().logger });
    g.nextId();
    const d = g.describe();
    expect(d.kind).toBe("SnowflakeId");
    expect(d.converter.kind).toBe("Radix62IdConverter");
    expect(d.state).toMatchObject({ machineId: 7, machineBit: 10, sequenceBit: 12, safeJavascript: false });
    expect(d.state.lastTimestamp).toBeGreaterThan(Date.now() - 1000);
  });
});

describe("SafeSnowflakeId (41/3/9, number)", () => {
  it("issues safe integers, unique and increasing", () => {
    const g = new SafeSnowflakeId({ machine: 7, logger: captureLogs().logger });
    let prev = -1;
    for (let i = 0; i < 50_000; i++) {
      const id = g.nextId();
      expect(Number.isSafeInteger(id) && id > prev).toBe(true);
      prev = id;
    }
    expect(parseSnowflake(prev, g.layout).machineId).toBe(7);
    expect(g.describe().state.safeJavascript).toBe(true);
  });

  it("rejects layouts above 53 bits", () => {
    expect(() => new SafeSnowflakeId({ machine: 0, layout: { machineBit: 10, sequenceBit: 12 } })).toThrow(InvalidSettingError);
  });
});

describe("clock moved backwards (injected clock)", () => {
  it("logs WARN `Detected clock backwards`, refuses synchronously, waits in nextIdAsync, and never reuses an id", async () => {
    const logs = captureLogs();
    const clock = shiftableClock();
    const g = new SnowflakeId({ machine: 3, clock, logger: logs.logger, name: "cb-test" });
    const events: { name: string; action: string }[] = [];
    const onEvent = (m: unknown) => void ((m as { name: string }).name === "cb-test" && events.push(m as (typeof events)[number]));
    diagnostics_channel.subscribe("gov:idgen:clock-backwards", onEvent);
    const ids: bigint[] = [];
    for (let i = 0; i < 1000; i++) ids.push(g.nextId());
    clock.shift(-30); // NTP step back by 30 ms
    expect(() => g.nextId()).toThrow(ClockBackwardsException);
    expect(() => g.nextId()).toThrow(ClockBackwardsException); // the same episode: refused again, counted once
    expect(g.describe().state.clockBackwards).toBe(1);
    expect(logs.find("warn", "Detected clock backwards")).toHaveLength(1);
    expect(logs.find("warn", "Detected clock backwards")[0]).toMatchObject({ backwardsMs: expect.any(Number), generator: "cb-test" });
    // nextIdAsync waits until the (shifted) clock is back at the last tick issued before the step, and goes on in it
    // with the next sequence — however long the test itself took since the step, so no fixed duration is asserted
    const lastTick = parseSnowflake(ids[ids.length - 1], g.layout).timestamp;
    const first = await g.nextIdAsync();
    expect(parseSnowflake(first, g.layout).timestamp).toBeGreaterThanOrEqual(lastTick);
    expect(clock.now()).toBeGreaterThanOrEqual(lastTick);
    ids.push(first);
    for (let i = 1; i < 1000; i++) ids.push(await g.nextIdAsync());
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) expect(ids[i] > ids[i - 1]).toBe(true);
    expect(g.describe().state.clockBackwards).toBe(1); // one step back, one episode, whatever the calls during it
    diagnostics_channel.unsubscribe("gov:idgen:clock-backwards", onEvent);
    expect(events.map((e) => e.action)).toContain("refused");
    expect(events.map((e) => e.action)).toContain("sleep");
  });

  it("spins out a 1 ms step without throwing", () => {
    const clock = shiftableClock();
    const g = new SnowflakeId({ machine: 3, clock, logger: captureLogs().logger });
    const a = g.nextId();
    clock.shift(-1);
    const b = g.nextId();
    expect(b > a).toBe(true);
  });

  it("gives up with ClockTooManyBackwardsException beyond the broken threshold, even async", async () => {
    const clock = shiftableClock();
    const g = new SnowflakeId({ machine: 3, clock, logger: captureLogs().logger, brokenThresholdMs: 100 });
    g.nextId();
    clock.shift(-5_000);
    expect(() => g.nextId()).toThrow(ClockTooManyBackwardsException);
    await expect(g.nextIdAsync()).rejects.toBeInstanceOf(ClockTooManyBackwardsException);
  });
});

describe("lease stop rule (manual distributor, injected monotonic clock)", () => {
  it("stops at T − min(10 s, T/10) without a renewal and stays stopped until redistribute()", async () => {
    expect(stopAfterMs(300_000)).toBe(290_000); // default: 4 min 50 s
    expect(stopAfterMs(2_000)).toBe(1_800);
    const mono = manualMonotonic();
    const logs = captureLogs();
    const lease = await MachineLease.acquire({
      namespace: "t",
      instanceId: "i",
      machineBit: 10,
      distributor: manualDistributor(9),
      safeGuardMs: 2_000,
      monotonic: mono.now,
      autoRenew: false,
      logger: logs.logger,
    });
    const g = new SnowflakeId({ machine: lease, logger: logs.logger });
    g.nextId();
    mono.advance(1_799);
    await new Promise((r) => setTimeout(r, 2)); // next tick
    expect(() => g.nextId()).not.toThrow();
    mono.advance(1);
    await new Promise((r) => setTimeout(r, 2));
    expect(() => g.nextId()).toThrow(MachineIdLostException);
    expect(lease.state()).toMatchObject({ status: "LOST", lost: true });
    await lease.renew(); // a lost lease is not revived by a renewal
    expect(() => g.nextId()).toThrow(MachineIdLostException);
    await lease.redistribute();
    await new Promise((r) => setTimeout(r, 2));
    expect(parseSnowflake(g.nextId(), g.layout).machineId).toBe(9);
    const err = (() => {
      try {
        lease.assertUsable();
        mono.advance(10_000);
        lease.assertUsable();
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(MachineIdLostException);
    expect((err as Error).name).toBe("MachineIdLostException");
    await lease.revert();
  });
});
