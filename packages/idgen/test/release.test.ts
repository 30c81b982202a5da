import { describe, expect, it } from "vitest";
import { MachineLease, type MachineIdDistributor } from "../src/index.js";
import { captureLogs } from "./helpers.js";

describe("the release at shutdown, when the caller stops waiting for it", () => {
  it("logs Revert machine id of [...] failed once: at the abandon, not again when the release still out fails later", async () => {
    let fail!: (err: Error) => void;
    const distributor: MachineIdDistributor = {
      type: "redis",
      distribute: async () => ({ machineId: 2, lastTimestamp: 0 }),
      guard: async () => true,
      revert: () => new Promise<void>((_, reject) => (fail = reject)),
    };
    const logs = captureLogs();
    const lease = await MachineLease.acquire({ namespace: "ns", instanceId: "host:1", machineBit: 4, distributor, autoRenew: false, requestTimeoutMs: 60_000, logger: logs.logger });
    const released = lease.revert();
    lease.abandonRelease("the shutdown gave up on the store");
    expect(logs.find("error", "Revert machine id of [host:1] failed")).toEqual([expect.objectContaining({ error: "Error: the shutdown gave up on the store" })]);
    fail(new Error("Command timed out"));
    await released;
    lease.abandonRelease("again");
    expect(logs.find("error", "Revert machine id of [host:1] failed")).toHaveLength(1);
  });

  it("logs nothing when the release was done, or when the lease was lost (nothing of ours to release)", async () => {
    const distributor: MachineIdDistributor = { type: "redis", distribute: async () => ({ machineId: 2, lastTimestamp: 0 }), guard: async () => false, revert: async () => {} };
    const logs = captureLogs();
    const done = await MachineLease.acquire({ namespace: "ns", instanceId: "host:2", machineBit: 4, distributor, autoRenew: false, logger: logs.logger });
    await done.revert();
    done.abandonRelease("late");
    const lost = await MachineLease.acquire({ namespace: "ns", instanceId: "host:3", machineBit: 4, distributor, autoRenew: false, logger: logs.logger });
    await lost.renew(); // the store says it is not ours
    expect(lost.state().status).toBe("LOST");
    lost.abandonRelease("late");
    expect(logs.lines.filter((l) => l.msg.startsWith("Revert machine id"))).toHaveLength(0);
  });
});
