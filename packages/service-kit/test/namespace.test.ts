import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { checkNamespace } from "../src/index.js";

const strict = { requireHashTag: true };
const rejects = (ns: string, rule = strict) => {
  try {
    checkNamespace(ns, rule);
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    return (err as ConnectError).rawMessage;
  }
  throw new Error(`"${ns}" was accepted`);
};

describe("namespace rule (contract §2)", () => {
  it("accepts names whose first {...} is a non-empty hash tag", () => {
    for (const ns of ["{dev}", "cosky-{dev}", "team-{a}-x", "{a}{b}", "gov-{system}"]) expect(() => checkNamespace(ns, strict)).not.toThrow();
  });

  it("rejects untagged names with the rule explained, never adding braces itself", () => {
    const message = rejects("dev");
    expect(message).toContain('e.g. "{dev}" or "cosky-{dev}"');
    expect(message).toContain("never adds braces");
    for (const ns of ["{}", "{}{dev}", "dev}", "}{dev", "{dev"]) rejects(ns); // Redis would hash these keys whole
  });

  it("rejects empty names, ':', whitespace, control characters and over-long names", () => {
    expect(rejects("")).toMatch(/required/);
    for (const ns of ["{a}:cfg", "{a b}", "{a}\n", "{a}\u0000", "{a}\u0085", `{${"x".repeat(300)}}`]) rejects(ns);
  });

  it("rejects bidirectional text controls (a name must display as what it is), quoting the name escaped", () => {
    for (const c of ["\u202e", "\u2066", "\u200f", "\u061c"]) expect(rejects(`{dev}${c}`)).toContain("bidirectional");
    expect(rejects("{dev}\u202eved")).toContain('"{dev}?ved"'); // shown as it reads, never reversed
    expect(() => checkNamespace("{team-\u{1f468}\u200d\u{1f469}}", strict)).not.toThrow(); // a joiner is not a bidi control
  });

  it("with require-hash-tag=false, plain names pass (standalone storage only) but the character rules stay", () => {
    expect(() => checkNamespace("dev", { requireHashTag: false })).not.toThrow();
    rejects("a:b", { requireHashTag: false });
  });
});
