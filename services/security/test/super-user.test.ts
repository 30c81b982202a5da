import { loadSettings } from "@gov/settings";
import { createLogger } from "@gov/service-kit";
import { describe, expect, it } from "vitest";
import { securityModuleSettings } from "../src/settings.js";
import { createMemorySecurityStore } from "../src/store/memory-security-store.js";
import type { SecurityStore } from "../src/store/security-store.js";
import { startSecure } from "./harness.js";

/** The embedded store outlives a process here (its close only drops listeners): two starts on the same users. */
const keep = (store: SecurityStore): SecurityStore => ({ ...store, close: async () => {} });

describe("the super user", () => {
  it("is created at the first start with a generated password shown once, which logs in; later starts keep it", async () => {
    const store = createMemorySecurityStore();
    const shown: string[] = [];
    const first = await startSecure({ name: "embedded" }, { GOV_SUPER_PASSWORD: "" }, { securityStore: keep(store), announce: (t) => shown.push(t) });
    let password = "";
    try {
      expect(shown).toHaveLength(1);
      password = /created with the password: ([\w-]+)/.exec(shown[0])![1];
      expect(shown[0]).toContain("/v1/authenticate/root/login");
      expect((await first.login("root", password)).accessToken).toBeTruthy();
    } finally {
      await first.close();
    }
    // a second start neither shows nor changes it; a password setting does not override an existing super user, and
    // says so (a login with it would fail without a word)
    const lines: { msg: string }[] = [];
    const log = createLogger("second", "info", { write: (line: string) => void lines.push(JSON.parse(line)) });
    const second = await startSecure({ name: "embedded" }, { GOV_SUPER_PASSWORD: "another-password" }, { securityStore: keep(store), announce: (t) => shown.push(t), logger: log });
    try {
      expect(shown).toHaveLength(1);
      expect((await second.login("root", password)).accessToken).toBeTruthy();
      expect(lines.map((l) => l.msg)).toContain("super user exists: gov.super.password was not applied (it sets the password of a new super user only; gov.super.init=true resets it to the setting at startup)");
    } finally {
      await second.close();
    }
  });

  it("its login hint names the address the REST API listens on (PORT, HOST), not the default 8080", async () => {
    const shown: string[] = [];
    const env = { GOV_SUPER_PASSWORD: "", PORT: "19851", HOST: "127.0.0.1" };
    const p = await startSecure({ name: "embedded" }, env, { securityStore: createMemorySecurityStore(), announce: (t) => shown.push(t), listenAsConfigured: true });
    try {
      expect(p.url).toBe("http://127.0.0.1:19851");
      expect(shown).toHaveLength(1);
      expect(shown[0]).toContain("It is shown this once. Log in:\n");
      expect(shown[0]).toContain(`${p.url}/v1/authenticate/root/login | jq -r .accessToken)`);
      expect(shown[0]).toContain(`curl -H "Authorization: Bearer $TOKEN" ${p.url}/v1/users`);
      expect(shown[0]).not.toContain("8080");
      // the hint's request, as printed, logs in
      const body = /-d '(\{.*?\})'/.exec(shown[0])![1];
      const login = await fetch(`${p.url}/v1/authenticate/root/login`, { method: "POST", body, headers: { "content-type": "application/x-www-form-urlencoded" } });
      expect([login.status, typeof (await login.json()).accessToken]).toEqual([200, "string"]);
    } finally {
      await p.close();
    }
  });

  it("gov.super.init resets it at startup: the new password, unlocked, the old one refused", async () => {
    const store = createMemorySecurityStore();
    const first = await startSecure({ name: "embedded" }, { GOV_SUPER_PASSWORD: "old-password" }, { securityStore: keep(store) });
    await first.close();
    const shown: string[] = [];
    const reset = await startSecure({ name: "embedded" }, { GOV_SUPER_PASSWORD: "new-password", GOV_SUPER_INIT: "true" }, { securityStore: keep(store), announce: (t) => shown.push(t) });
    try {
      expect(shown).toEqual([]); // a password from the settings is never printed
      expect((await reset.rest("POST", "/v1/authenticate/root/login", { body: { password: "old-password" } })).status).toBe(401);
      expect((await reset.login("root", "new-password")).accessToken).toBeTruthy();
    } finally {
      await reset.close();
    }
    const forced = await startSecure({ name: "embedded" }, { GOV_SUPER_PASSWORD: "", GOV_SECURITY_ENFORCE_INIT_SUPER_USER: "true" }, { securityStore: keep(store), announce: (t) => shown.push(t) });
    try {
      const generated = /reset with the password: ([\w-]+)/.exec(shown[0] ?? "")?.[1];
      expect(generated, shown.join("\n")).toBeDefined();
      expect((await forced.login("root", generated!)).accessToken).toBeTruthy();
    } finally {
      await forced.close();
    }
  });
});

describe("a flood of logins", () => {
  it("is refused past the concurrent password checks (429 in the contract's shape), never queued without bound", async () => {
    const p = await startSecure({ name: "embedded" });
    try {
      const answers = await Promise.all(
        Array.from({ length: 120 }, (_, i) => p.rest("POST", `/v1/authenticate/${i % 2 ? "root" : "nobody"}/login`, { body: { password: "wrong-password" } })),
      );
      const statuses = answers.map((a) => a.status);
      expect(statuses.every((s) => s === 401 || s === 429), statuses.join(",")).toBe(true);
      expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
      expect(answers.find((a) => a.status === 429)!.body).toEqual({ code: "resource_exhausted", message: "too many logins at once: retry in a moment" });
      // and it recovers at once
      expect((await p.rest("POST", "/v1/authenticate/root/login", { body: { password: "wrong-password" } })).status).toBe(401);
    } finally {
      await p.close();
    }
  });

  it("a super user no login could use is refused at startup, naming the setting: a blank name, an empty password", () => {
    const load = (env: Record<string, string>, file: Record<string, string> = {}) => () => loadSettings(securityModuleSettings, { env, file, filePath: "/etc/gov.yaml" });
    expect(load({ GOV_SUPER_USERNAME: "  " })).toThrow(/setting gov\.super\.username \(from environment variable GOV_SUPER_USERNAME\) is invalid: must not be empty/);
    expect(load({}, { "gov.super.password": "" })).toThrow(/setting gov\.super\.password \(from \/etc\/gov\.yaml\) is invalid: must not be empty: remove the setting to have a password generated/);
    expect(load({ GOV_SUPER_PASSWORD: "" }, {})().superPassword).toBeUndefined(); // an empty variable is unset: generated
    expect(load({ GOV_SUPER_USERNAME: " admin " })().superUsername).toBe("admin");
  });
});
