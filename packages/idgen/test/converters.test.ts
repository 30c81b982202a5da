import { describe, expect, it } from "vitest";
import {
  CompositeIdGenerator,
  friendlyConverter,
  InvalidIdError,
  MILLISECOND_LAYOUT,
  composeSnowflake,
  parseCompositeId,
  prefixConverter,
  radix36Converter,
  radix62Converter,
  SnowflakeId,
  suffixConverter,
  toStringConverter,
} from "../src/index.js";
import { captureLogs } from "./helpers.js";

const MAX_63 = 2n ** 63n - 1n;

describe("radix converters", () => {
  it("radix-62 round-trips, pads to 11 chars and sorts like the ids", () => {
    const c = radix62Converter();
    const g = new SnowflakeId({ machine: 5, logger: captureLogs().logger });
    const ids = Array.from({ length: 5000 }, () => g.nextId());
    const strs = ids.map((id) => c.asString(id));
    expect(strs.every((s) => s.length === 11)).toBe(true);
    expect(strs.map((s) => c.asId(s))).toEqual(ids);
    expect([...strs].sort()).toEqual(strs); // byte order == id order
    expect(c.asString(MAX_63)).toBe("AzL8n0Y58m7");
    expect(c.asString(0)).toBe("00000000000");
  });

  it("radix-36 round-trips with 13 characters", () => {
    const c = radix36Converter();
    expect(c.asString(MAX_63)).toHaveLength(13);
    expect(c.asId(c.asString(123456789012345678n))).toBe(123456789012345678n);
    expect(c.asString(35)).toBe("000000000000Z");
  });

  it("unpadded, bounded char size rejects ids that do not fit and bad input", () => {
    const c = radix62Converter({ charSize: 2, padStart: false });
    expect(c.asString(61)).toBe("z");
    expect(() => c.asString(62 * 62)).toThrow(InvalidIdError);
    expect(() => c.asId("a-")).toThrow(InvalidIdError);
    expect(c.describe()).toMatchObject({ kind: "Radix62IdConverter", charSize: 2, padStart: false, maxId: "3843" });
  });
});

describe("to-string, friendly, prefix/suffix", () => {
  it("to-string pads when asked", () => {
    expect(toStringConverter().asString(42n)).toBe("42");
    expect(toStringConverter({ padStart: true, charSize: 6 }).asString(42)).toBe("000042");
    expect(toStringConverter().asId("0042")).toBe(42n);
    expect(() => toStringConverter().asId("x")).toThrow(InvalidIdError);
  });

  it("friendly shows UTC date-time, machine and sequence, and parses back", () => {
    const c = friendlyConverter(MILLISECOND_LAYOUT);
    const id = composeSnowflake({ timestamp: Date.UTC(2021, 5, 23, 13, 17, 30, 192), machineId: 1, sequence: 0 }, MILLISECOND_LAYOUT);
    expect(c.asString(id)).toBe("20210623131730192-1-0");
    expect(c.asId("20210623131730192-1-0")).toBe(id);
    expect(friendlyConverter(MILLISECOND_LAYOUT, { padStart: true }).asString(id)).toBe("20210623131730192-0001-0000");
    expect(() => c.asId("20210623131730192-5000-0")).toThrow(InvalidIdError);
    // a date asString never writes (month 13, February 30, hour 25) is refused, not rolled over into another
    for (const bad of ["20261301000000000-1-1", "20260230000000000-1-1", "20260101250000000-1-1"]) expect(() => c.asId(bad), bad).toThrow(/is not a date and time/);
  });

  it("every converter refuses what is out of range, both ways: a string it reads back is one it could write", () => {
    expect(() => toStringConverter().asId("99999999999999999999999999")).toThrow(/ids have 63 bits/);
    expect(() => radix62Converter().asString(2n ** 63n)).toThrow(InvalidIdError);
    expect(radix62Converter().asId(radix62Converter().asString(2n ** 63n - 1n))).toBe(2n ** 63n - 1n);
    expect(() => parseCompositeId("000000000000zzz")).toThrow(/sequence above 65535/);
    expect(() => parseCompositeId("00000000zzzz000")).toThrow(/machine id above 1048575/);
    expect(() => parseCompositeId("zzzzzzzz0000000")).toThrow(/timestamp above 44 bits/);
  });

  it("prefix and suffix wrap another converter and require their affix when parsing", () => {
    const c = suffixConverter("-x", prefixConverter("ord_", radix62Converter()));
    expect(c.asString(62)).toBe("ord_00000000010-x");
    expect(c.asId("ord_00000000010-x")).toBe(62n);
    expect(() => c.asId("inv_00000000010-x")).toThrow(InvalidIdError);
    expect(c.describe()).toMatchObject({ kind: "SuffixIdConverter", actual: { kind: "PrefixIdConverter", prefix: "ord_", actual: { kind: "Radix62IdConverter" } } });
  });
});

describe("CompositeIdGenerator", () => {
  it("issues 15-char radix-62 strings (time | machine | sequence) that are unique and sort by issue order", () => {
    const g = new CompositeIdGenerator({ machine: 1000, logger: captureLogs().logger });
    const ids = Array.from({ length: 100_000 }, () => g.nextIdAsString());
    expect(ids.every((s) => s.length === 15)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    const p = parseCompositeId(ids[ids.length - 1]);
    expect(p.machineId).toBe(1000);
    expect(Math.abs(p.timestamp - Date.now())).toBeLessThan(5000);
    expect("nextId" in g).toBe(false); // string-only
    expect(g.describe()).toMatchObject({ kind: "CompositeIdGenerator", state: { machineId: 1000 } });
  });
});
