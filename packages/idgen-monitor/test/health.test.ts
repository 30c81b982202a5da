import { IdGeneratorRegistry, MachineLease, type IdGen, type LeaseState, type MachineIdDistributor } from "@gov/idgen";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { idgenReadiness, machineIdHealth } from "../src/index.js";

const state = (over: Partial<LeaseState>): LeaseState => ({
  namespace: "ns",
  instanceId: "host:1",
  machineId: 3,
  distributor: "redis",
  status: "UP",
  lost: false,
  distributedAt: 1_000,
  lastRenewalAt: 1_000,
  lastError: null,
  failedAt: null,
  stopDeadline: 1_000 + 290_000,
  stopClock: null,
  checkingSince: null,
  wallGapMs: null,
  consecutiveFailures: 0,
  renewals: { success: 0, failure: 0, lost: 0 },
  safeGuardMs: 300_000,
  ...over,
});
const idgenWith = (s: LeaseState) => ({ lease: { state: () => s }, registry: new IdGeneratorRegistry(), config: { namespace: "ns", machine: { machineId: 0 } } }) as unknown as IdGen;

describe("machineId health while the lease is CHECKING (wall clock past the stop deadline, monotonic clock not)", () => {
  it("is DOWN with checking: true and the wall-clock gap, not shown as stopped; readiness stays UP (a passing state)", () => {
    const s = state({ status: "CHECKING", stopClock: "wall", checkingSince: Date.UTC(2026, 0, 1), wallGapMs: 3_600_000 });
    const health = machineIdHealth(idgenWith(s));
    expect(health).toMatchObject({ status: "DOWN", details: { checking: true, checkingSince: "2026-01-01T00:00:00.000Z", machineId: 3 } });
    expect(health.details!.reason).toMatch(/wall clock ran 3600000 ms ahead of the monotonic clock/);
    expect(health.details).not.toHaveProperty("stopped");
    expect(idgenReadiness(idgenWith(s))).toEqual({ status: "UP" });
  });
});

describe("readiness while a wall-clock jump cannot be confirmed (the store does not answer the check)", () => {
  it("is DOWN while the confirming renewal fails — ids are refused until one succeeds, up to the stop rule — and UP once it does", async () => {
    let wall = Date.UTC(2026, 0, 1);
    let mono = 1_000;
    let storeUp = true;
    const distributor: MachineIdDistributor = {
      type: "redis",
      distribute: async () => ({ machineId: 3, lastTimestamp: 0 }),
      guard: async () => {
        if (!storeUp) throw new Error("connect ECONNREFUSED 127.0.0.1:6379");
        return true;
      },
      revert: async () => {},
    };
    const lease = await MachineLease.acquire({
      namespace: "ns",
      instanceId: "host:1",
      machineBit: 4,
      distributor,
      autoRenew: false,
      safeGuardMs: 300_000,
      clock: { now: () => wall },
      monotonic: () => mono,
      logger: pino({ level: "silent" }),
    });
    const idgen = { lease, registry: new IdGeneratorRegistry(), config: { namespace: "ns", machine: { enabled: true, machineId: 0 } } } as unknown as IdGen;
    // the host was suspended for an hour and wakes up without its network: the check's renewal fails
    storeUp = false;
    wall += 3_600_000;
    mono += 1_000;
    expect(lease.state().status).toBe("CHECKING");
    await lease.renew(); // the renewal the check sent
    expect(lease.state()).toMatchObject({ status: "CHECKING", consecutiveFailures: 1 });
    expect(() => lease.assertUsable(wall)).toThrow(/being re-confirmed/); // every request needing an id: 503
    expect(idgenReadiness(idgen)).toMatchObject({ status: "DOWN", details: { reason: expect.stringContaining("could not be confirmed") } });
    storeUp = true;
    await lease.renew();
    expect(lease.state().status).toBe("UP");
    expect(idgenReadiness(idgen)).toEqual({ status: "UP" });
  });
});
