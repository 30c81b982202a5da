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
    const env = { IDGEN_MACHINE_ENABLED: "false", IDGEN_SNOWFLAKE_ENABLED: "false", IDGEN_GENERATOR_ENABLED: "false", IDGEN_SHARE: "segment", IDGEN_SEGMENT_ENABLED: "true", IDGEN_SEGMENT_DISTRIBUTOR_TYPE: "redis" };
    const segment = startIdgenMonitor({ sources: { env, file: {} }, application: "app", logger: capturedLogger().logger, registry: new Registry() });
    await expect(segment).rejects.toThrow(/setting idgen.segment.distributor.type \(from environment variable IDGEN_SEGMENT_DISTRIBUTOR_TYPE\) is invalid: redis needs the process's Redis: set REDIS_URL, or use memory/);
  });
});

describe("a process without a machine id (idgen.machine.enabled=false, segment ids only)", () => {
  it("is refused while the generators that need one are on; allowed, its health and metrics name no machine id", async () => {
    const start = (env: Record<string, string>) => startIdgenMonitor({ sources: { env, file: {} }, application: "app", logger: capturedLogger().logger, registry: new Registry() });
    await expect(start({ IDGEN_MACHINE_ENABLED: "false" })).rejects.toThrow(/idgen.machine.enabled: false leaves no machine id, which idgen.snowflake.enabled and idgen.generator.enabled need/);
    const registry = new Registry();
    const env = {
      IDGEN_MACHINE_ENABLED: "false",
      IDGEN_SNOWFLAKE_ENABLED: "false",
      IDGEN_GENERATOR_ENABLED: "false",
      IDGEN_SHARE: "segment",
      IDGEN_SEGMENT_ENABLED: "true",
      MANAGEMENT_ENDPOINT_HEALTH_SHOW_DETAILS: "always",
    };
    const monitor = await startIdgenMonitor({ sources: { env, file: {} }, application: "app", logger: capturedLogger().logger, registry });
    try {
      expect(monitor.nextId()).toMatch(/^\S+$/);
      const { machineId } = await monitor.healthComponents(undefined);
      expect(machineId.status).toBe("UP");
      expect(machineId.details).toEqual({ distributor: "none", namespace: "app" }); // it held none (it said 0, "manual")
      const text = await registry.metrics();
      expect(text).not.toMatch(/^idgen_machine_id\{/m);
      expect(text).not.toMatch(/^idgen_machine_lease_up\{/m);
    } finally {
      await monitor.close();
    }
  });
});
