import { describe, expect, it } from "vitest";
import { capturedLogger } from "./helpers.js";
import { Registry } from "prom-client";
import { startIdgenMonitor } from "../src/monitor.js";
import { idgenConfigFromSources } from "../src/settings.js";

describe("idgen.* settings in a process", () => {
  it("a bad value names the setting and where it came from, as the gov.* settings do", () => {
    const fromEnv = () => idgenConfigFromSources({ env: { IDGEN_MACHINE_MACHINE_ID: "5000" }, file: {} }, "app");
    expect(fromEnv).toThrow(/Invalid setting idgen.machine.machine-id: "5000" is not an integer in 0..1023 \(from environment variable IDGEN_MACHINE_MACHINE_ID\)/);
    const fromFile = () => idgenConfigFromSources({ env: {}, file: { "idgen.segment.step": "-1" }, filePath: "/etc/gov.yaml" }, "app");
    expect(fromFile).toThrow(/idgen.segment.step.*\(from \/etc\/gov.yaml\)/);
  });

  it("an empty IDGEN_… variable is unset: the file's value holds (a manual machine id falling back to 0 would collide)", () => {
    const config = idgenConfigFromSources({ env: { IDGEN_MACHINE_MACHINE_ID: "", IDGEN_NAMESPACE: "" }, file: { "idgen.machine.machine-id": "7" } }, "orders");
    expect(config.machine.machineId).toBe(7);
    expect(config.namespace).toBe("orders");
  });

  it("the redis distributor in a process without Redis names the setting, where it came from, and REDIS_URL", async () => {
    const start = startIdgenMonitor({ sources: { env: { IDGEN_MACHINE_DISTRIBUTOR_TYPE: "redis" }, file: {} }, application: "app", logger: capturedLogger().logger, registry: new Registry() });
    await expect(start).rejects.toThrow(/setting idgen.machine.distributor.type \(from environment variable IDGEN_MACHINE_DISTRIBUTOR_TYPE\) is invalid: redis needs the process's Redis: set REDIS_URL, or use manual/);
    // the segment counter's too (it was kept in memory instead: every process counting from 1)
    const env = { IDGEN_MACHINE_ENABLED: "false", IDGEN_SEGMENT_ENABLED: "true", IDGEN_SEGMENT_DISTRIBUTOR_TYPE: "redis" };
    const segment = startIdgenMonitor({ sources: { env, file: {} }, application: "app", logger: capturedLogger().logger, registry: new Registry() });
    await expect(segment).rejects.toThrow(/setting idgen.segment.distributor.type \(from environment variable IDGEN_SEGMENT_DISTRIBUTOR_TYPE\) is invalid: redis needs the process's Redis: set REDIS_URL, or use memory/);
  });
});
