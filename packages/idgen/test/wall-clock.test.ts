import { connectRedis, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CompositeIdGenerator,
  LeaseUnconfirmedError,
  MachineIdLostException,
  MachineLease,
  manualDistributor,
  parseSnowflake,
  SnowflakeId,
  stopAfterMs,
  type MachineIdDistributor,
} from "../src/index.js";
import { captureLogs, LEVEL, manualMonotonic, redisLeases, shiftableClock, uniqueNamespace } from "./helpers.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const WALL_JUMP = /^Wall clock ran \d+ ms ahead of the monotonic clock since the last renewal \(host suspended, or a forward clock step\): machine id \d+ issues no ids until a renewal confirms the lease is still ours$/;

/**
 * The lease's stop rule on both clocks. The monotonic clock (CLOCK_MONOTONIC) stands still while the host is suspended;
 * Redis TIME, which decides when a lease is stale, does not. A suspend is simulated with a monotonic clock the test
 * never advances while real time (Redis TIME, the lease's wall clock) goes on.
 */
for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`lease stop rule on the wall clock too, on ${target.name}`, () => {
    let client: RedisClient;
    beforeAll(async () => {
      client = await connectRedis(target.url);
    });
    afterAll(() => client?.disconnect());

    // machineBit 1: two ids, so a third lease gets the stalest one
    const lease = redisLeases(() => client, 1);

    it("a host suspended for longer than T issues no id under the machine id another process reclaimed meanwhile: zero duplicates", async () => {
      const ns = uniqueNamespace("suspend");
      const T = 600; // stop after 540 ms
      const logs = captureLogs();
      const wallA = shiftableClock();
      const monoA = manualMonotonic(); // never advanced: the whole test is one suspend of A
      const a = await lease(ns, "a", { safeGuardMs: T, clock: wallA, monotonic: monoA.now, logger: logs.logger });
      const filler = await lease(ns, "filler", { safeGuardMs: T });
      const gA = new SnowflakeId({ machine: a, clock: wallA, layout: { machineBit: 1 }, logger: logs.logger });
      const cA = new CompositeIdGenerator({ machine: a, clock: wallA, logger: logs.logger });
      const m = a.machineId;
      for (let i = 0; i < 1_000; i++) gA.nextId(); // before the suspend
      cA.nextIdAsString();

      // A is suspended for longer than T: Redis TIME (and A's wall clock) move on, A's monotonic clock does not
      await sleep(T + 150);
      await filler.renew(); // the other id stays live, so A's lease is the stale one
      const b = await lease(ns, "b", { safeGuardMs: T });
      expect(b.machineId).toBe(m); // B reclaimed A's machine id
      const gB = new SnowflakeId({ machine: b, layout: { machineBit: 1 }, logger: logs.logger });

      // A resumes: both issue ids, interleaved, in the same milliseconds
      const idsB = new Set<bigint>();
      const idsA: bigint[] = [];
      const refused: string[] = [];
      for (let i = 0; i < 20_000; i++) {
        idsB.add(gB.nextId());
        try {
          idsA.push(gA.nextId());
        } catch (err) {
          if (!(err instanceof LeaseUnconfirmedError || err instanceof MachineIdLostException)) throw err;
          refused.push(err.name);
        }
        if (i % 2_000 === 0) await new Promise((r) => setImmediate(r)); // let A's check reach Redis and come back
      }
      expect(idsB.size).toBe(20_000);
      expect(idsA.filter((id) => idsB.has(id))).toEqual([]); // no duplicate
      expect(idsA.filter((id) => parseSnowflake(id, gA.layout).machineId === m)).toEqual([]);
      expect(refused[0]).toBe("LeaseUnconfirmedError"); // the first call after resuming found the wall clock past the deadline
      expect(() => cA.nextIdAsString()).toThrow(/LeaseUnconfirmedError|MachineIdLostException|re-confirmed|lost/);

      // the check the jump triggered found the lease gone: LOST as before, and said which clock fired
      await a.renew();
      expect(a.state()).toMatchObject({ status: "LOST", lost: true, stopClock: "wall", renewals: { success: 0, lost: 1 } });
      expect(a.state().wallGapMs).toBeGreaterThanOrEqual(T);
      await expect(gA.nextIdAsync()).rejects.toBeInstanceOf(MachineIdLostException);
      const warns = logs.lines.filter((l) => l.level === LEVEL.warn);
      expect(warns).toHaveLength(1);
      expect(warns[0].msg).toMatch(WALL_JUMP);
      expect(warns[0]).toMatchObject({ machineId: m, wallGapMs: expect.any(Number), monotonicElapsedMs: 0 });
      expect(logs.find("error", "Machine id lost; Snowflake generators stopped")).toHaveLength(1);
      await Promise.all([b.revert(), filler.revert()]);
    });

    it("a forward wall-clock step past the stop deadline costs one renewal: ids wait for it, then flow again, nothing lost", async () => {
      const ns = uniqueNamespace("forward-step");
      const logs = captureLogs();
      const wall = shiftableClock();
      const a = await lease(ns, "a", { safeGuardMs: 60_000, clock: wall, logger: logs.logger }); // real monotonic clock
      const g = new SnowflakeId({ machine: a, clock: wall, layout: { machineBit: 1 }, logger: logs.logger });
      const ids = [g.nextId()];
      const stepAt = wall.now();
      wall.shift(stopAfterMs(60_000) + 5_000); // NTP steps the clock forward by 59 s

      expect(() => g.nextId()).toThrow(LeaseUnconfirmedError);
      expect(() => g.nextId()).toThrow(/is being re-confirmed with the redis store: the wall clock ran \d+ ms ahead of the monotonic clock/);
      expect(a.state()).toMatchObject({ status: "CHECKING", lost: false, stopClock: "wall" });
      expect(a.state().wallGapMs).toBeGreaterThanOrEqual(58_990); // monotonic ms are fractional
      expect(a.state().checkingSince).toBeGreaterThanOrEqual(stepAt + 59_000);

      ids.push(await g.nextIdAsync()); // waits for the renewal the step triggered, then issues
      const st = a.state();
      expect(st).toMatchObject({ status: "UP", lost: false, stopClock: null, checkingSince: null, wallGapMs: null, renewals: { success: 1, failure: 0, lost: 0 } });
      expect(st.lastRenewalAt).toBeGreaterThanOrEqual(stepAt + 59_000); // both baselines reset by the renewal
      expect(st.stopDeadline).toBe(st.lastRenewalAt + stopAfterMs(60_000));
      for (let i = 0; i < 10_000; i++) ids.push(g.nextId());
      expect(new Set(ids).size).toBe(ids.length);
      for (let i = 1; i < ids.length; i++) expect(ids[i] > ids[i - 1]).toBe(true);
      expect(parseSnowflake(ids[ids.length - 1], g.layout).machineId).toBe(a.machineId);

      expect(logs.lines.filter((l) => l.level === LEVEL.warn).map((l) => l.msg)).toEqual([expect.stringMatching(WALL_JUMP)]); // once
      expect(logs.find("info", "Machine id confirmed after the wall-clock jump; ids resume")).toHaveLength(1);
      expect(logs.lines.filter((l) => l.level >= LEVEL.error)).toEqual([]);
      await a.revert();
    });
  });
}

describe("lease stop rule on the wall clock (injected clocks, no store)", () => {
  it("a backward wall-clock step changes nothing: no check, no renewal, and the monotonic rule still stops at T − min(10 s, T/10)", async () => {
    const mono = manualMonotonic();
    const wall = shiftableClock();
    const logs = captureLogs();
    const lease = await MachineLease.acquire({ namespace: "t", instanceId: "i", machineBit: 10, distributor: manualDistributor(5), safeGuardMs: 2_000, clock: wall, monotonic: mono.now, autoRenew: false, logger: logs.logger });
    const before = lease.state();
    wall.shift(-60_000);
    expect(() => lease.assertUsable()).not.toThrow();
    expect(lease.state()).toMatchObject({ status: "UP", stopClock: null, stopDeadline: before.stopDeadline, lastRenewalAt: before.lastRenewalAt, renewals: before.renewals });
    mono.advance(1_799);
    expect(() => lease.assertUsable()).not.toThrow(); // the step gave no extra time
    mono.advance(1);
    expect(() => lease.assertUsable()).toThrow(MachineIdLostException);
    expect(lease.state()).toMatchObject({ status: "LOST", stopClock: "monotonic" });
    expect(logs.lines.filter((l) => l.level === LEVEL.warn)).toEqual([]);
  });

  it("the wall deadline passing within min(1 s, 1 % of it) of the monotonic one is the ordinary stop rule: LOST, no check, no WARN", async () => {
    const mono = manualMonotonic();
    const wall = shiftableClock();
    const logs = captureLogs();
    const lease = await MachineLease.acquire({ namespace: "t", instanceId: "i", machineBit: 10, distributor: manualDistributor(5), safeGuardMs: 2_000, clock: wall, monotonic: mono.now, autoRenew: false, logger: logs.logger });
    mono.advance(1_790); // 10 ms before the monotonic deadline (tolerance 18 ms)
    wall.shift(1_800); // the wall clock (slewed fast, say) is already there
    expect(() => lease.assertUsable()).toThrow(MachineIdLostException);
    expect(lease.state()).toMatchObject({ status: "LOST", stopClock: "wall", renewals: { success: 0, failure: 0, lost: 0 } });
    expect(logs.lines.filter((l) => l.level === LEVEL.warn)).toEqual([]);
  });

  it("a renewal sent before a suspend and answered after it confirms nothing: a fresh one is sent at once", async () => {
    const wall = shiftableClock();
    const mono = manualMonotonic();
    const answers: ((ours: boolean) => void)[] = [];
    const sent: number[] = [];
    const distributor: MachineIdDistributor = {
      type: "test",
      distribute: async () => ({ machineId: 3, lastTimestamp: 0 }),
      guard: (req) => {
        sent.push(req.now);
        return new Promise<boolean>((resolve) => answers.push(resolve));
      },
      revert: async () => {},
    };
    const lease = await MachineLease.acquire({ namespace: "t", instanceId: "i", machineBit: 4, distributor, safeGuardMs: 2_000, clock: wall, monotonic: mono.now, autoRenew: false, requestTimeoutMs: 60_000, logger: captureLogs().logger });
    const first = lease.renew(); // out when the host is suspended
    wall.shift(5_000);
    expect(() => lease.assertUsable()).toThrow(LeaseUnconfirmedError);
    expect(sent).toHaveLength(1); // the check joined the renewal already out
    answers[0](true);
    await first;
    expect(lease.state().status).toBe("CHECKING"); // the answer may predate a recycling
    expect(sent).toHaveLength(2); // so a fresh renewal went out
    expect(sent[1]).toBeGreaterThanOrEqual(sent[0] + 5_000);
    const pending = lease.confirmation();
    expect(pending).toBeDefined();
    answers[1](true);
    await pending;
    expect(lease.state()).toMatchObject({ status: "UP", stopClock: null, renewals: { success: 1 } });
    expect(() => lease.assertUsable()).not.toThrow();
    await lease.revert();
  });
});
