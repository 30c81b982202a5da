import { createLogger } from "@gov/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT_PASSWORD, startSecure, type SecureProcess } from "./harness.js";

// gov.log.access=true writes every request's target. A password or token a client put in the query string is refused
// by the gateway ("URLs are kept in logs and histories"), and must not then be kept in this process's own log.
describe("the access log (gov.log.access=true) never writes a credential sent in a query string", () => {
  const lines: string[] = [];
  let p: SecureProcess;
  beforeAll(async () => {
    const logger = createLogger("test", "info", { write: (line: string) => void lines.push(line) });
    p = await startSecure({ name: "embedded" }, { GOV_LOG_ACCESS: "true" }, { logger });
  });
  afterAll(() => p?.close());

  it("writes *** for the values of password and token parameters, and keeps the rest of the target", async () => {
    const { accessToken, refreshToken } = await p.login("root", ROOT_PASSWORD);
    const secret = "query-secret-Xy7";
    let r = await p.rest("PATCH", `/v1/users/root/password?newPassword=${secret}&oldPassword=${secret}`, { token: accessToken, body: {} });
    expect([r.status, r.body.code]).toEqual([400, "invalid_argument"]);
    r = await p.rest("POST", `/v1/authenticate/root/login?password=${secret}`, { body: {} });
    expect(r.status).toBe(400);
    r = await p.rest("POST", `/v1/authenticate/root/refresh?refresh_token=${refreshToken}`, { body: { accessToken } });
    expect(r.status).toBe(400);
    // a parameter the API does not know, the usual spelling of a bearer token in a URL: ignored, and not logged either
    r = await p.rest("GET", `/v1/users?access_token=${accessToken}&limit=5`, { token: accessToken });
    expect(r.status).toBe(200);
    const requests = () => lines.map((l) => JSON.parse(l) as { msg: string; req?: { url?: string } }).filter((l) => l.msg === "request completed");
    await expect.poll(() => requests().length).toBeGreaterThanOrEqual(5);
    const all = lines.join("\n");
    for (const leaked of [secret, accessToken, refreshToken, ROOT_PASSWORD]) expect(all).not.toContain(leaked);
    const urls = requests().map((l) => l.req?.url);
    expect(urls).toContain("/v1/users/root/password?newPassword=***&oldPassword=***");
    expect(urls).toContain("/v1/authenticate/root/login?password=***");
    expect(urls).toContain("/v1/authenticate/root/refresh?refresh_token=***");
    expect(urls).toContain("/v1/users?access_token=***&limit=5");
  });
});
