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
  });

  it("rejects characters that do not show, naming the character and writing the name out (the user-name rule)", () => {
    // "{dev}" + U+200B lists, logs and reads as "{dev}" and is another namespace: other data, other role bindings
    expect(rejects("{dev}\u200b")).toBe('namespace "{dev}\\u200b" contains U+200B, a character that does not show (a zero-width or format character): remove it');
    for (const c of ["\u00ad", "\u2060", "\u3164", "\ufe0f", "\u{e0041}", "\u034f", "\u200d"]) expect(rejects(`{dev${c}}`)).toContain("does not show");
    // other scripts, accents and plain emoji show as what they are
    for (const ns of ["{zöne}", "{開発}", "{команда}", "{team-\u{1f680}}"]) expect(() => checkNamespace(ns, strict)).not.toThrow();
  });

  it("with require-hash-tag=false, plain names pass (standalone storage only) but the character rules stay", () => {
    expect(() => checkNamespace("dev", { requireHashTag: false })).not.toThrow();
    rejects("a:b", { requireHashTag: false });
  });
});
