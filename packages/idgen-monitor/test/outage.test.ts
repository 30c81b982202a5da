import { configModule } from "@gov/config-service";
import { restGateway } from "@gov/gateway";
import { Code, ConnectError } from "@connectrpc/connect";
import { buildProcess, type BuiltProcess, type ModuleContext, type ServiceModule } from "@gov/service-kit";
import { startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { capturedLogger, sample, sources, TOKEN, waitUntil } from "./helpers.js";

const admin = { authorization: `Bearer ${TOKEN}` };
const RENEWAL_MS = 200;
const REQUEST_TIMEOUT_MS = 150;
const T_MS = 3_000; // generators stop 2.7 s after the last successful renewal

/**
 * A gateway alone (its module remote, never called) on a real redis-server that the test stops and restarts by PID.
 * Its readiness has one component, `idgen`, so what turns it DOWN is the generator and nothing else.
 */
/** A module that only keeps its context: it takes ids the way a service does (audit entries). */
function contextProbe(): { module: ServiceModule; ctx: () => ModuleContext } {
  let kept: ModuleContext | undefined;
  const module: ServiceModule = {
    name: "probe",
    services: [],
    settings: {},
    ports: { port: 0, grpcPort: 0 },
    async create(ctx) {
      kept = ctx;
      return { impls: [], health: () => ({ status: "UP" }), close: async () => {} };
    },
  };
  return { module, ctx: () => kept! };
}

describe.skipIf(inject("redisSkipReason"))("machine-id lease outage, seen from the management listener", () => {
  let server: RedisServer;
  let proc: BuiltProcess;
  let url: string;
  const log = capturedLogger();
  const issued: string[] = [];
  const probe = contextProbe();

  beforeAll(async () => {
    server = await startRedis();
    proc = await buildProcess({
      name: "gov.gateway",
      modules: [configModule, probe.module],
      gateway: restGateway,
      logger: log.logger,
      sources: sources({
        REDIS_URL: server.url,
        GOV_CONFIG_SERVICE_URL: "http://127.0.0.1:9",
        MANAGEMENT_TOKEN: TOKEN,
        IDGEN_MACHINE_GUARDER_INITIAL_DELAY: `${RENEWAL_MS}ms`,
        IDGEN_MACHINE_GUARDER_DELAY: `${RENEWAL_MS}ms`,
        IDGEN_MACHINE_GUARDER_RETRY_DELAY: `${RENEWAL_MS}ms`,
        IDGEN_MACHINE_GUARDER_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`,
        IDGEN_MACHINE_GUARDER_SAFE_GUARD_DURATION: `${T_MS}ms`,
      }),
    });
    ({ url } = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" }));
  });
  afterAll(async () => {
    await proc?.shutdown();
    await server?.stop();
  });

  const health = async () => (await proc.management.inject({ url: "/actuator/health", headers: admin })).json().components.machineId;
  const metrics = async () => (await proc.management.inject({ url: "/metrics" })).body;
  /** A request that needs an id (no x-request-id of its own). */
  const request = async () => {
    const res = await fetch(`${url}/openapi.json`);
    const body = await res.text();
    return { status: res.status, body };
  };
  const issueMany = () => {
    for (let i = 0; i < 2_500; i++) issued.push(proc.monitor!.nextId(), probe.ctx().ids.nextId());
  };

  it("Redis stopped → machineId DOWN with error and time within one renewal; failures rise; Redis back → UP", async () => {
    expect(await health()).toMatchObject({ status: "UP", details: { distributor: "redis", namespace: "gov" } });
    expect((await request()).status).toBe(200);
    issueMany();

    await server.stop();
    const stoppedAt = Date.now();
    await waitUntil("machineId DOWN", async () => (await health()).status === "DOWN", 5_000);
    // one renewal attempt: the next scheduled renewal (≤ RENEWAL_MS away) plus its request timeout, with slack for a busy host
    expect(Date.now() - stoppedAt).toBeLessThan(RENEWAL_MS + REQUEST_TIMEOUT_MS + 1_000);
    const down = await health();
    expect(down.details.error).toMatch(/^\w+: .+/);
    expect(Date.parse(down.details.failedAt)).toBeGreaterThanOrEqual(stoppedAt - 50);
    expect(Date.parse(down.details.failedAt)).toBeLessThanOrEqual(Date.now());
    const guardFailed = log.find("Guard Failed");
    expect(guardFailed.length).toBeGreaterThanOrEqual(1);
    expect(guardFailed[0]).toMatchObject({ level: 50, logger: "gov.idgen", namespace: "gov" });

    const first = await metrics();
    expect(sample(first, "idgen_machine_lease_up", '{namespace="gov"}')).toBe(0);
    const failures = sample(first, "idgen_machine_lease_renewals_total", '{namespace="gov",result="failure"}')!;
    expect(failures).toBeGreaterThanOrEqual(1);
    await waitUntil("a rising failure count", async () => sample(await metrics(), "idgen_machine_lease_renewals_total", '{namespace="gov",result="failure"}')! > failures);
    // still within the deadline: ids are issued (from the lease it still holds)
    expect((await request()).status).toBe(200);
    issueMany();

    await server.start();
    await waitUntil("machineId UP again", async () => (await health()).status === "UP", 8_000);
    expect(sample(await metrics(), "idgen_machine_lease_up", '{namespace="gov"}')).toBe(1);
    expect((await proc.management.inject({ url: "/actuator/health/readiness" })).statusCode).toBe(200);
  });

  it("kept down past T − min(10 s, T/10) → generators stop, readiness DOWN, id-needing requests 503, no duplicate id", async () => {
    issueMany();
    await server.stop();
    await waitUntil("readiness DOWN", async () => (await proc.management.inject({ url: "/actuator/health/readiness" })).statusCode === 503, T_MS + 3_000);
    // details (the store's error) for authorized callers only, as show-details=when-authorized says; status for all
    const readiness = (await proc.management.inject({ url: "/actuator/health/readiness", headers: admin })).json();
    expect(readiness.components.idgen).toMatchObject({ status: "DOWN", details: { reason: expect.stringContaining("ID generator stopped") } });
    expect((await proc.management.inject({ url: "/actuator/health/readiness" })).json().components.idgen).toEqual({ status: "DOWN" });
    expect((await proc.management.inject({ url: "/actuator/health" })).json().components.readiness.components.idgen).toEqual({ status: "DOWN" });
    // the management token's scheme is case-insensitive
    expect((await proc.management.inject({ url: "/actuator/health/readiness", headers: { authorization: `bearer ${TOKEN}` } })).json().components.idgen.details).toBeDefined();
    const stopped = await health();
    expect(stopped).toMatchObject({ status: "DOWN", details: { stopped: true, error: expect.any(String) } });
    expect(Date.parse(stopped.details.stoppedAt)).toBeLessThanOrEqual(Date.now());
    expect(sample(await metrics(), "idgen_machine_lease_up", '{namespace="gov"}')).toBe(0);
    // only a restart repairs it: liveness says so, for the orchestrator's probe
    const live = await proc.management.inject({ url: "/actuator/health/liveness" });
    expect([live.statusCode, live.json()]).toEqual([503, { status: "DOWN" }]);

    const refused = await request();
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({ code: "unavailable", message: expect.stringContaining("cannot issue ids (MachineIdLostException") });
    // answered before any route, yet in the log: the first refusal whole, the next ones counted
    expect((await request()).status).toBe(503);
    expect(log.lines.filter((l) => l.level === 40 && String(l.msg).includes("cannot issue ids"))).toHaveLength(1);
    expect(() => proc.monitor!.nextId()).toThrow(/cannot issue ids/);
    // a module's ids (ctx.ids): a ConnectError `unavailable`, which every listener answers as 503
    const err = (() => {
      try {
        probe.ctx().ids.nextId();
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConnectError);
    expect(err).toMatchObject({ code: Code.Unavailable, rawMessage: expect.stringContaining("cannot issue ids") });

    // Redis back does not revive a stopped generator: it stays stopped (and says so) until the process restarts
    await server.start();
    expect((await request()).status).toBe(503);
    expect(new Set(issued).size).toBe(issued.length);
    expect(issued.length).toBe(15_000);
  });
});
