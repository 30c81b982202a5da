import { describe, expect, it } from "vitest";
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
    // a second start neither shows nor changes it; a password setting does not override an existing super user
    const second = await startSecure({ name: "embedded" }, { GOV_SUPER_PASSWORD: "another-password" }, { securityStore: keep(store), announce: (t) => shown.push(t) });
    try {
      expect(shown).toHaveLength(1);
      expect((await second.login("root", password)).accessToken).toBeTruthy();
    } finally {
      await second.close();
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
