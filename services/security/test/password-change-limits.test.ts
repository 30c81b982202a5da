import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT_PASSWORD, startSecure, type SecureProcess } from "./harness.js";

// A password change proves the old password under the login's rules: one longer than any password can be (1024 bytes)
// is refused before it is hashed, as the login refuses it, and does not count toward the user's lockout.
describe("PATCH /v1/users/{u}/password: an over-long oldPassword", () => {
  let p: SecureProcess;
  beforeAll(async () => {
    p = await startSecure({ name: "embedded" });
  });
  afterAll(() => p?.close());

  it("is 400 before any work, like a login's, and does not lock the user", async () => {
    const root = (await p.login("root", ROOT_PASSWORD)).accessToken;
    expect((await p.rest("POST", "/v1/users/hanna", { token: root, body: { password: "hanna-pass" } })).status).toBe(200);
    const { accessToken } = await p.login("hanna", "hanna-pass");
    const long = "x".repeat(2000);
    expect((await p.rest("POST", "/v1/authenticate/hanna/login", { body: { password: long } })).body).toEqual({
      code: "invalid_argument",
      message: "password is longer than 1024 bytes: choose a shorter one",
    });
    for (let i = 0; i < 10; i++) {
      const r = await p.rest("PATCH", "/v1/users/hanna/password", { token: accessToken, body: { oldPassword: long, newPassword: "hanna-pass-2" } });
      expect([r.status, r.body]).toEqual([400, { code: "invalid_argument", message: "oldPassword is longer than 1024 bytes: choose a shorter one" }]);
    }
    // not counted as 10 wrong passwords: the user is not locked, and the right old password changes it
    expect((await p.rest("GET", "/v1/users", { token: root })).body).toContainEqual({ username: "hanna", roles: [], locked: false });
    const right = await p.rest("PATCH", "/v1/users/hanna/password", { token: accessToken, body: { oldPassword: "hanna-pass", newPassword: "hanna-pass-2" } });
    expect([right.status, right.body]).toEqual([200, true]);
  });
});
