import { describe, expect, it } from "vitest";
import { sharedRootSession } from "./harness.js";

const seg = encodeURIComponent;

// Two names that differ only in how Unicode spells the same letters (composed U+00F3 "ó", or "o" + combining U+0301)
// show identically in the user list, the role list and the audit log: one of them could pass for the other.
describe("new user and role names are taken in composed Unicode form (NFC) only", () => {
  const session = sharedRootSession();

  it("refuses a decomposed name (400, naming the composed one) and keeps taking the composed name", async () => {
    const { p, root } = session;
    const composed = "r\u00f3ot";
    const decomposed = "ro\u0301ot";
    expect((await p.rest("POST", `/v1/users/${seg(composed)}`, { token: root, body: { password: "s3cret-pass" } })).status).toBe(200);
    const twin = await p.rest("POST", `/v1/users/${seg(decomposed)}`, { token: root, body: { password: "s3cret-pass" } });
    expect([twin.status, twin.body]).toEqual([
      400,
      { code: "invalid_argument", message: `username is not in composed Unicode form (NFC): it shows the same as ${JSON.stringify(composed)}, which would be another name; send that` },
    ]);
    // the Angstrom sign looks like Å (U+00C5): the same
    expect((await p.rest("POST", `/v1/users/${seg("\u212bsa")}`, { token: root, body: { password: "s3cret-pass" } })).status).toBe(400);
    expect((await p.rest("GET", "/v1/users", { token: root })).body.map((u: { username: string }) => u.username).filter((n: string) => n.normalize("NFC") === composed)).toEqual([composed]);

    expect((await p.rest("PUT", `/v1/roles/${seg("adm\u00edn")}`, { token: root, body: { desc: "d" } })).status).toBe(200);
    const role = await p.rest("PUT", `/v1/roles/${seg("admi\u0301n")}`, { token: root, body: { desc: "d" } });
    expect([role.status, role.body.code, role.body.message]).toEqual([400, "invalid_argument", expect.stringMatching(/^roleName is not in composed Unicode form \(NFC\)/)]);
    // scripts whose composed form is what keyboards send, and emoji, still go through
    for (const name of ["\ud55c\uad6d\uc5b4", "\u65e5\u672c", "fam\u{1f468}\u200d\u{1f469}", "r\u00e9sum\u00e9"]) {
      expect((await p.rest("POST", `/v1/users/${seg(name)}`, { token: root, body: { password: "s3cret-pass" } })).status, name).toBe(200);
    }
  });
});
