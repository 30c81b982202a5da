import { restGateway } from "@gov/gateway";
import { createSecurityGuard, createSecurityModule } from "@gov/security-service";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createWorkerModule } from "../src/worker/worker-module.js";
import { freshSystem } from "./namespace-harness.js";
import { FAST } from "./stats-harness.js";

const PASSWORD = "root-password-for-tests";

/**
 * A process that serves no RPC of its own — a gateway whose services all run elsewhere, a stats worker — still has a
 * management port whose admins are the security service's (contract §9): on the shared Redis it knows their tokens.
 * Before, only MANAGEMENT_TOKEN worked there and a root's access token was answered 401.
 */
describe.skipIf(inject("redisSkipReason"))("management endpoints of processes without services of their own (security on, Redis)", () => {
  const procs: BuiltProcess[] = [];
  const managementUrls: Record<string, string> = {};
  let root: string;
  let bob: string;
  const env = { REDIS_URL: inject("redisUrl"), GOV_NAMESPACE_SYSTEM: freshSystem(), GOV_SUPER_PASSWORD: PASSWORD, GOV_SHUTDOWN_GRACE: "1s", MANAGEMENT_ENDPOINTS_WEB_EXPOSURE_INCLUDE: "health,idgen,idgenGenerator" };
  const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

  const call = async (url: string, token?: string, init: RequestInit = {}) => {
    const res = await fetch(url, { ...init, headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(init.body ? { "content-type": "application/json" } : {}) } });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
  };

  beforeAll(async () => {
    // the security service, with its REST API
    const security = await buildProcess({ name: "test-security", modules: [createSecurityModule({ announce: () => {} })], gateway: restGateway, guard: createSecurityGuard(), sources: { file: {}, env }, logger });
    procs.push(security);
    const securityUrls = await security.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
    // a gateway whose one service is remote, and a worker
    const gateway = await buildProcess({ name: "test-gateway-alone", modules: [createSecurityModule({ announce: () => {} })], gateway: restGateway, guard: createSecurityGuard(), sources: { file: {}, env: { ...env, GOV_SECURITY_SERVICE_URL: securityUrls.url } }, logger });
    procs.push(gateway);
    managementUrls.gateway = (await gateway.listen({ port: 0, managementPort: 0, host: "127.0.0.1" })).managementUrl;
    const worker = await buildProcess({ name: "test-worker", modules: [createWorkerModule({ worker: FAST })], guard: createSecurityGuard(), sources: { file: {}, env: { ...env, GOV_WORKER_SERVICE_PORT: "0" } }, logger });
    procs.push(worker);
    managementUrls.worker = (await worker.listen({ managementPort: 0, host: "127.0.0.1" })).managementUrl;
    const login = async (user: string, password: string) => (await call(`${securityUrls.url}/v1/authenticate/${user}/login`, undefined, { method: "POST", body: JSON.stringify({ password }) })).body!.accessToken as string;
    root = await login("root", PASSWORD);
    expect((await call(`${securityUrls.url}/v1/users/bob`, root, { method: "POST", body: JSON.stringify({ password: "bob-password" }) })).body).toBe(true);
    bob = await login("bob", "bob-password");
  });
  afterAll(async () => {
    for (const p of procs.reverse()) await p.shutdown();
  });

  for (const kind of ["gateway", "worker"]) {
    it(`${kind}: id operations take an admin's token (200), not a user's (403) nor none (401); health details for users`, async () => {
      const op = `${managementUrls[kind]}/actuator/idgenGenerator/snowflake`;
      expect((await call(op, root)).status).toBe(200);
      expect((await call(op, bob)).status).toBe(403);
      expect((await call(op)).status).toBe(401);
      const machineIdOf = async (token?: string) => ((await call(`${managementUrls[kind]}/actuator/health`, token)).body!.components as Record<string, Record<string, unknown>>).machineId;
      expect(await machineIdOf(bob)).toEqual({ status: "UP", details: expect.objectContaining({ machineId: expect.any(Number) }) });
      expect(await machineIdOf()).toEqual({ status: "UP" });
    });
  }
});
