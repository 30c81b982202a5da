import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as api from "../src/index.js";

const readme = readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "README.md"), "utf8");

describe("error catalogue", () => {
  it("every error class is exported, named after itself, and listed with its code in the README", () => {
    const samples: api.IdGenError[] = [
      new api.MachineIdLostException("x"),
      new api.MachineIdOverflowException("x"),
      new api.LeaseRequestTimeoutError("x"),
      new api.LeaseUnconfirmedError("x"),
      new api.ClockBackwardsException(5, 1),
      new api.ClockTooManyBackwardsException(900, 500, 1),
      new api.ClockStalledError("x"),
      new api.TimestampOverflowException("x"),
      new api.SegmentExhaustedError("x"),
      new api.InvalidSettingError("idgen.x", "bad"),
      new api.InvalidIdError("x"),
      new api.GeneratorNotFoundError("x"),
    ];
    expect(samples.map((e) => e.constructor)).toEqual(api.errorClasses.slice(1));
    for (const e of samples) {
      expect(e).toBeInstanceOf(api.IdGenError);
      expect(e).toBeInstanceOf(Error);
      expect(e.name).toBe(e.constructor.name);
      expect((api as Record<string, unknown>)[e.name]).toBe(e.constructor);
      expect(readme).toContain(`| \`${e.name}\` | \`${e.code}\` |`);
    }
    expect(new api.MachineIdLostException("x").name).toBe("MachineIdLostException");
  });

  it("every diagnostics channel and operator log message is documented in the README", () => {
    for (const ch of api.CHANNEL_NAMES) expect(readme).toContain(`\`${ch}\``);
    for (const msg of ["Guard Failed", "Detected clock backwards", "Hunger, Safety distance expansion", "prefetch failed", "prefetch still failing", "Revert machine id of [", "ms ahead of the monotonic clock since the last renewal", "Machine id confirmed after the wall-clock jump; ids resume"]) {
      expect(readme).toContain(msg);
    }
  });
});
