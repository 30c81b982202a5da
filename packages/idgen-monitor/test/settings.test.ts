import { describe, expect, it } from "vitest";
import { idgenConfigFromSources } from "../src/settings.js";

describe("idgen.* settings in a process", () => {
  it("a bad value names the setting and where it came from, as the gov.* settings do", () => {
    const fromEnv = () => idgenConfigFromSources({ env: { IDGEN_MACHINE_MACHINE_ID: "5000" }, file: {} }, "app");
    expect(fromEnv).toThrow(/Invalid setting idgen.machine.machine-id: "5000" is not an integer in 0..1023 \(from environment variable IDGEN_MACHINE_MACHINE_ID\)/);
    const fromFile = () => idgenConfigFromSources({ env: {}, file: { "idgen.segment.step": "-1" }, filePath: "/etc/gov.yaml" }, "app");
    expect(fromFile).toThrow(/idgen.segment.step.*\(from \/etc\/gov.yaml\)/);
  });
});
