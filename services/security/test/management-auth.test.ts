import { restGateway } from "@gov/gateway";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSecurityGuard, createSecurityModule } from "../src/module.js";

const PASSWORD = "root-password-for-tests";

/**
 * The management listener's trusted callers are the security service's (contract §9): an admin's access token may call
 * the exposed id operations, a plain user's is refused with 403, no token with 401; health details follow the same rule.
 */
describe("management endpoints with security on", () => {
  let proc: BuiltProcess;
  let urls: { url: string; managementUrl: string };
  let root: string;
  let bob: string;

  const rest = async (method: string, url: string, token?: string, body?: unknown) => {
    const res = await fetch(url, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
  };
  const login = async (user: string, password: string) => (await rest("POST", `${urls.url}/v1/authenticate/${user}/login`, undefined, { password })).body!.accessToken as string;

  beforeAll(async () => {
    proc = await buildProcess({
      name: "test-management-auth",
      modules: [createSecurityModule({ announce: () => {} })],
      gateway: restGateway,
      guard: createSecurityGuard(),
      sources: { file: {}, env: { GOV_SUPER_PASSWORD: PASSWORD, GOV_SHUTDOWN_GRACE: "1s", MANAGEMENT_ENDPOINTS_WEB_EXPOSURE_INCLUDE: "health,idgen,idgenGenerator" } },
      logger: createLogger("test", "silent"),
    });
    urls = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
    root = await login("root", PASSWORD);
    expect((await rest("POST", `${urls.url}/v1/users/bob`, root, { password: "bob-password" })).body).toBe(true);
    bob = await login("bob", "bob-password");
  });
  afterAll(async () => proc?.shutdown());

  it("id operations: an admin's token 200, a user's 403, none 401", async () => {
    const op = `${urls.managementUrl}/actuator/idgenGenerator/snowflake`;
    expect((await rest("GET", op, root)).status).toBe(200);
    expect((await rest("GET", op, bob)).status).toBe(403);
    expect((await rest("GET", op)).status).toBe(401);
    expect((await rest("GET", op, "not-a-token")).status).toBe(401);
  });

  it("health details (when-authorized): shown to a logged-in user, hidden from anonymous callers", async () => {
    const health = `${urls.managementUrl}/actuator/health`;
    const machineIdOf = async (token?: string) => ((await rest("GET", health, token)).body!.components as Record<string, Record<string, unknown>>).machineId;
    expect(await machineIdOf(bob)).toEqual({ status: "UP", details: expect.objectContaining({ machineId: expect.any(Number) }) });
    expect(await machineIdOf()).toEqual({ status: "UP" });
  });
});
