import { IdGeneratorRegistry, type IdGen, type LeaseState } from "@gov/idgen";
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
