import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { checkNamespace, checkNewNamespace, composedFormOf, invisibleCharacterIn } from "../src/index.js";

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

  it("a new namespace (created, or written into) holds no character that does not show; one from before is still reached", () => {
    const rejectsNew = (ns: string) => {
      try {
        checkNewNamespace(ns, strict);
      } catch (err) {
        expect((err as ConnectError).code).toBe(Code.InvalidArgument);
        return (err as ConnectError).rawMessage;
      }
      throw new Error(`"${ns}" was accepted`);
    };
    // "{dev}" + U+200B lists, logs and reads as "{dev}" and is another namespace: other data, other role bindings
    expect(rejectsNew("{dev}\u200b")).toBe('namespace "{dev}\\u200b" contains U+200B, a character that does not show (a zero-width or format character): remove it');
    for (const c of ["\u00ad", "\u2060", "\u3164", "\ufe0f", "\u{e0041}", "\u034f", "\u200d"]) expect(rejectsNew(`{dev${c}}`)).toContain("does not show");
    // other scripts, accents and emoji — also those made of several code points — show as what they are
    for (const ns of ["{zöne}", "{開発}", "{команда}", "{team-\u{1f680}}", "{team-\u2764\ufe0f}", "{team-\u{1f468}\u200d\u{1f469}\u200d\u{1f467}}", "{team-\u{1f3f3}\ufe0f\u200d\u{1f308}}", "{team-1\ufe0f\u20e3}", "{team-\u{1f44d}\u{1f3fd}}"]) {
      expect(() => checkNewNamespace(ns, strict), ns).not.toThrow();
    }
    // a joiner or selector outside an emoji does not show
    for (const ns of ["{team-\u{1f468}\u200d}", "{dev\u200d\u{1f468}}", "{dev\ufe0f}"]) rejectsNew(ns);
    // printable ASCII has nothing to find (its fast path); DEL and C0 controls just outside it are still found
    expect(invisibleCharacterIn(" {a-z_~}!")).toBeUndefined();
    expect(invisibleCharacterIn("{dev}\u007f")).toBe("U+007F");
    expect(invisibleCharacterIn("{dev}\u001f")).toBe("U+001F");
    // a namespace created with one before the rule can still be read, renewed into, exported and deleted
    expect(() => checkNamespace("{dev}\u200b", strict)).not.toThrow();
  });

  it("composedFormOf: the NFC form of a decomposed name, nothing for a composed one or printable ASCII", () => {
    expect(composedFormOf("cafe\u0301")).toBe("caf\u00e9");
    expect(composedFormOf("\u212b")).toBe("\u00c5"); // the Angstrom sign shows as Å
    expect(composedFormOf("caf\u00e9")).toBeUndefined();
    expect(composedFormOf("order-service_1.v2")).toBeUndefined();
  });

  it("with require-hash-tag=false, plain names pass (standalone storage only) but the character rules stay", () => {
    expect(() => checkNamespace("dev", { requireHashTag: false })).not.toThrow();
    rejects("a:b", { requireHashTag: false });
  });

  it('"current" is never a namespace to write into, also with require-hash-tag=false (it names the current-namespace route)', () => {
    const loose = { requireHashTag: false };
    let message = "";
    try {
      checkNewNamespace("current", loose);
    } catch (err) {
      expect((err as ConnectError).code).toBe(Code.InvalidArgument);
      message = (err as ConnectError).rawMessage;
    }
    expect(message).toContain('"current" cannot name a namespace');
    // reads still reach data an earlier release let in; other names, and "{current}", are fine
    expect(() => checkNamespace("current", loose)).not.toThrow();
    for (const ns of ["currently", "Current", "{current}"]) expect(() => checkNewNamespace(ns, loose)).not.toThrow();
  });
});
