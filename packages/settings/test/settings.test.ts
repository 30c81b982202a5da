import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envName, loadSettings, logLevelFromEnv, misspelledFileKeys, parseBytes, parseDuration, parseDurationBetween, parseEnum, parseInteger, readSettingsSources, SettingsError, type SettingDef } from "../src/index.js";

const defs = {
  ttl: { name: "sec.jwt.token-validity.refresh", parse: parseDuration, default: 10_800_000, doc: "" } as SettingDef<number>,
  action: { name: "gov.security.audit-log.action", parse: parseEnum("write", "read", "rw"), default: "write", doc: "" } as SettingDef<string>,
  port: { name: "PORT", parse: Number, default: 8080, doc: "" } as SettingDef<number>,
};

describe("settings", () => {
  it("maps dotted names to environment variables as contract §8 says", () => {
    expect(envName("gov.security.audit-log.action")).toBe("GOV_SECURITY_AUDIT_LOG_ACTION");
    expect(envName("PORT")).toBe("PORT");
  });

  it("parses durations and sizes in the documented forms", () => {
    expect(parseDuration("15m")).toBe(900_000);
    expect(parseDuration("3H")).toBe(10_800_000);
    expect(parseDuration("10s")).toBe(10_000);
    expect(parseDuration("250ms")).toBe(250);
    expect(() => parseDuration("soon")).toThrow(/not a duration/);
    expect(parseBytes("1MiB")).toBe(1_048_576);
    expect(parseBytes("16MB")).toBe(16_000_000);
    const port = parseInteger(0, 65535);
    expect(port(" 8080 ")).toBe(8080);
    for (const bad of ["", "0x10", "1e3", "8.5", "70000"]) expect(() => port(bad)).toThrow(/whole number from 0 to 65535/);
  });

  it("env beats the YAML file, which beats the default; nested and dotted YAML keys both work", () => {
    const dir = mkdtempSync(join(tmpdir(), "settings-"));
    const file = join(dir, "gov.yaml");
    writeFileSync(file, "sec:\n  jwt:\n    token-validity.refresh: 1H\ngov.security.audit-log.action: rw\n");
    const fromFile = loadSettings(defs, readSettingsSources({ GOV_CONFIG: file }));
    expect(fromFile).toEqual({ ttl: 3_600_000, action: "rw", port: 8080 });
    const fromEnv = loadSettings(defs, readSettingsSources({ GOV_CONFIG: file, GOV_SECURITY_AUDIT_LOG_ACTION: "read", PORT: "9000" }));
    expect(fromEnv).toMatchObject({ action: "read", port: 9000 });
  });

  it("a bad value stops loading with a message naming the setting and its source", () => {
    expect(() => loadSettings(defs, readSettingsSources({ GOV_SECURITY_AUDIT_LOG_ACTION: "all" }, tmpdir()))).toThrow(
      'setting gov.security.audit-log.action (from environment variable GOV_SECURITY_AUDIT_LOG_ACTION) is invalid: "all" is not one of write, read, rw',
    );
    expect(() => readSettingsSources({ GOV_CONFIG: "/nope/gov.yaml" })).toThrow(/does not exist/);
  });
});

describe("parseDurationBetween", () => {
  it("takes durations inside the range and names the range when refusing", () => {
    const ttl = parseDurationBetween(1000, 86_400_000);
    expect(ttl("1s")).toBe(1000);
    expect(ttl("24h")).toBe(86_400_000);
    expect(() => ttl("999ms")).toThrow('"999ms" is out of range: use a duration from 1s to 1d');
    expect(() => ttl("25h")).toThrow("from 1s to 1d");
    expect(() => parseDurationBetween(100)("50")).toThrow("use a duration at least 100ms");
    expect(() => ttl("soon")).toThrow("is not a duration");
  });
});

describe("log level variables", () => {
  it("take pino's levels in any case; a bad one names the variable (pino would throw a stack about custom levels)", () => {
    expect(logLevelFromEnv({}, "GOV_LOG_LEVEL")).toBeUndefined();
    expect(logLevelFromEnv({ GOV_LOG_LEVEL: "WARN" }, "GOV_LOG_LEVEL")).toBe("warn");
    expect(() => logLevelFromEnv({ IDGEN_LOG_LEVEL: "loud" }, "IDGEN_LOG_LEVEL")).toThrow(SettingsError);
    expect(() => logLevelFromEnv({ IDGEN_LOG_LEVEL: "loud" }, "IDGEN_LOG_LEVEL")).toThrow(/Invalid setting IDGEN_LOG_LEVEL: "loud" is not a log level; use one of fatal, .* \(from environment variable IDGEN_LOG_LEVEL\)/);
  });
});

describe("misspelled keys in the settings file", () => {
  it("a key a letter or two from a setting the process read is named, with the setting meant; others are left alone", () => {
    const sources = {
      file: { "gov.security.audit-log.actoin": "rw", "sec.jwt.token-validity.refresh": "1h", "gov.worker-service.port": "8094", "PORTS": "1", "PORTAX": "x" },
      filePath: "gov.yaml",
      env: {},
    };
    loadSettings(defs, sources);
    loadSettings({ portal: { name: "PORTAL", parse: String, doc: "" } as SettingDef<string> }, sources);
    expect(misspelledFileKeys(sources)).toEqual([
      { key: "gov.security.audit-log.actoin", meant: "gov.security.audit-log.action" },
      { key: "PORTS", meant: "PORT" },
      { key: "PORTAX", meant: "PORTAL" }, // the closest, not PORT (two letters away), which was read first
    ]);
    // before any setting is read, nothing is known to be meant
    expect(misspelledFileKeys({ ...sources, file: { ...sources.file } })).toEqual([]);
  });
});
