import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT_PASSWORD, startSecure, type SecureProcess } from "./harness.js";

describe("smoke", () => {
  let p: SecureProcess;
  beforeAll(async () => {
    p = await startSecure({ name: "embedded" });
  });
  afterAll(() => p?.close());
  it("logs in and reads", async () => {
    expect((await p.rest("GET", "/v1/namespaces/%7Bdev%7D/configs")).status).toBe(401);
    const t = await p.login("root", ROOT_PASSWORD);
    const r = await p.rest("GET", "/v1/namespaces/%7Bdev%7D/configs", { token: t.accessToken });
    expect(r.status, r.text).toBe(200);
    const u = await p.rest("GET", "/v1/users", { token: t.accessToken });
    expect(u.body).toEqual([{ username: "root", roles: [], locked: false }]);
    const b = await p.rest("PATCH", "/v1/users/root/role", { token: t.accessToken, body: ["admin"] });
    expect(b.status, b.text).toBe(200);
  });
});
