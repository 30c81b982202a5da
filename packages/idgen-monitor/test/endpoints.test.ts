import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { configModule } from "@gov/config-service";
import { buildProcess, type BuiltProcess } from "@gov/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IDGEN_METRIC_NAMES } from "../src/index.js";
import { platform } from "../../../apps/platform.js";
import { capturedLogger, promtool, sources, TOKEN, USER_TOKEN } from "./helpers.js";

const admin = { authorization: `Bearer ${TOKEN}` };
const user = { authorization: `Bearer ${USER_TOKEN}` };
const authorizeManagement = async (header: string | undefined) => (header === `Bearer ${USER_TOKEN}` ? ("user" as const) : undefined);

/** A config service's own process on the embedded store (manual machine id), with the monitor settings in `env`. */
async function process(env: Record<string, string> = {}): Promise<BuiltProcess> {
  return buildProcess({ name: "gov.config-service", modules: [configModule], sources: sources({ MANAGEMENT_TOKEN: TOKEN, ...env }), authorizeManagement });
}

describe("idgen monitor on the management listener (manual machine id)", () => {
  let proc: BuiltProcess;
  beforeAll(async () => {
    proc = await process({ IDGEN_SEGMENT_ENABLED: "true", IDGEN_SEGMENT_PROVIDERS: "order" });
  });
  afterAll(() => proc?.shutdown());
  const get = (url: string, headers: Record<string, string> = {}) => proc.management.inject({ method: "GET", url, headers });

  it("health has a machineId component whose details only authorized callers see (when-authorized)", async () => {
    const anonymous = (await get("/actuator/health")).json();
    expect(anonymous.status).toBe("UP");
    expect(anonymous.components.machineId).toEqual({ status: "UP" });
    for (const headers of [admin, user]) {
      const shown = (await get("/actuator/health", headers)).json();
      expect(shown.components.machineId).toMatchObject({ status: "UP", details: { distributor: "manual", machineId: 0, namespace: "gov" } });
    }
    expect((await get("/actuator/health", { authorization: "Bearer wrong-token-xxxxxxxxxxxx" })).json().components.machineId).toEqual({ status: "UP" });
    expect((await get("/actuator/health/readiness")).json().components.idgen).toEqual({ status: "UP" });
  });

  it("GET /actuator/idgen lists every generator with kind, converter and state; /{name} one; unknown → 404", async () => {
    const list = (await get("/actuator/idgen")).json() as { name: string; kind: string; converter: { kind: string }; state: Record<string, unknown> }[];
    expect(list.map((g) => g.name).sort()).toEqual(["__share__", "idgen", "order", "snowflake"]);
    const snowflake = list.find((g) => g.name === "snowflake")!;
    expect(snowflake.kind).toMatch(/Snowflake/);
    expect(snowflake.converter.kind).toBeTruthy();
    expect(snowflake.state).toMatchObject({ machineId: 0 });
    expect(snowflake.state).toHaveProperty("lastTimestamp");
    const order = (await get("/actuator/idgen/order")).json();
    expect(order).toMatchObject({ name: "order", kind: "SegmentChainId", state: { currentSegment: { step: 10 }, prefetchDistance: 2 } });
    const missing = await get("/actuator/idgen/nope");
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: "not_found", message: expect.stringContaining("GET /actuator/idgen lists them") });
  });

  it("DELETE is 405 (Allow: GET) unless idgen.actuator.delete.enabled=true", async () => {
    const res = await proc.management.inject({ method: "DELETE", url: "/actuator/idgen/order", headers: admin });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe("GET");
    expect(res.json()).toEqual({ code: "unimplemented", message: expect.stringContaining("idgen.actuator.delete.enabled=true") }); // the REST API's 405
    expect((await get("/actuator/idgen/order")).statusCode).toBe(200);
  });

  it("operations are absent unless listed in management.endpoints.web.exposure.include", async () => {
    for (const path of ["/actuator/idgenGenerator", "/actuator/idgenGenerator/snowflake", "/actuator/idgenStringGenerator/idgen"]) {
      expect((await get(path, admin)).statusCode, path).toBe(404);
    }
  });

  it("/metrics has every idgen family and passes promtool check metrics", async () => {
    const body = (await get("/metrics")).body;
    for (const name of IDGEN_METRIC_NAMES) expect(body, name).toContain(`# TYPE ${name} `);
    expect(body).toContain('idgen_machine_lease_up{namespace="gov"} 1');
    expect(body).toMatch(/idgen_segment_remaining_ids\{namespace="gov",generator="order"\} \d+/);
    expect(body).not.toContain('generator="__share__"'); // the share alias is counted once, under its own name
    const tool = promtool();
    if (!tool) return void console.warn("promtool not installed: `apt-get install prometheus` to run the metrics lint");
    const out = execFileSync(tool, ["check", "metrics"], { input: body, encoding: "utf8" });
    expect(out).toBe("");
  });

  it("request ids come from the generator (the reqId of the request's log lines), a client's own x-request-id is kept", async () => {
    // a gateway whose config service is unreachable: each REST call is a 503, the first of the outage logged at warn
    // with its reqId (the others counted); every request's id is what its log lines would carry (req.id)
    const log = capturedLogger();
    const gw = await buildProcess({ ...platform, logger: log.logger, sources: sources({ GOV_CONFIG_SERVICE_URL: "http://127.0.0.1:9", GOV_REGISTRY_SERVICE_URL: "http://127.0.0.1:9" }) });
    const ids: string[] = [];
    gw.http.addHook("onResponse", async (req) => void ids.push(req.id));
    try {
      const { url } = await gw.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
      const call = async (headers: Record<string, string> = {}) => {
        const res = await fetch(`${url}/v1/namespaces/%7Bdemo%7D/configs/app.yaml`, { headers });
        await res.arrayBuffer();
        expect(res.status).toBe(503);
      };
      for (let i = 0; i < 20; i++) await call();
      await call({ "x-request-id": "client-abc-1" });
      expect(ids).toHaveLength(21);
      expect(new Set(ids.slice(0, 20)).size).toBe(20);
      for (const id of ids.slice(0, 20)) expect(id).toMatch(/^[0-9A-Za-z]{15}$/); // composite ids: time, machine, sequence
      expect(ids[20]).toBe("client-abc-1");
      expect(log.lines.filter((l) => l.level === 40 && l.reqId).map((l) => l.reqId)).toEqual([ids[0]]);
    } finally {
      await gw.shutdown();
    }
  });
});

describe("exposure, authorization and DELETE when enabled", () => {
  let proc: BuiltProcess;
  beforeAll(async () => {
    proc = await process({
      MANAGEMENT_ENDPOINTS_WEB_EXPOSURE_INCLUDE: "health,idgen,idgenGenerator,idgenStringGenerator",
      IDGEN_ACTUATOR_DELETE_ENABLED: "true",
      IDGEN_SEGMENT_ENABLED: "true",
      IDGEN_SEGMENT_PROVIDERS: "order,invoice",
    });
  });
  afterAll(() => proc?.shutdown());
  const call = (method: "GET" | "DELETE", url: string, headers: Record<string, string> = {}) => proc.management.inject({ method, url, headers });

  it("operations: 401 anonymous or wrong token, 403 for a non-admin, ids for an admin", async () => {
    for (const path of ["/actuator/idgenGenerator/snowflake", "/actuator/idgenStringGenerator", "/actuator/idgenStringGenerator/idgen?count=2"]) {
      const anonymous = await call("GET", path);
      expect(anonymous.statusCode, path).toBe(401);
      expect(anonymous.headers["www-authenticate"]).toContain("Bearer");
      expect((await call("GET", path, { authorization: "Bearer not-the-token-at-all" })).statusCode).toBe(401);
      expect((await call("GET", path, user)).statusCode, path).toBe(403);
    }
    const one = await call("GET", "/actuator/idgenGenerator/snowflake", admin);
    expect(one.statusCode).toBe(200);
    expect(one.json()).toMatch(/^\d+$/);
    const many = (await call("GET", "/actuator/idgenStringGenerator/idgen?count=5", admin)).json() as string[];
    expect(new Set(many).size).toBe(5);
    const share = (await call("GET", "/actuator/idgenStringGenerator", admin)).json();
    expect(share).toMatch(/^[0-9A-Za-z]{11}$/);
  });

  it("an operation asking a segment chain for more ids than it holds waits for its prefetch (it answered 503 'lease lost')", async () => {
    // step 10, safe distance 2: a chain holds a few dozen ids at most
    const res = await call("GET", "/actuator/idgenGenerator/invoice?count=1000", admin);
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    const ids = res.json() as string[];
    expect(new Set(ids).size).toBe(1000);
    // string ids too (the chain's converter over the waiting nextIdAsync): they were answered 503 with Redis healthy
    const text = await call("GET", "/actuator/idgenStringGenerator/invoice?count=1000", admin);
    expect(text.statusCode, text.body.slice(0, 300)).toBe(200);
    expect(new Set(text.json() as string[]).size).toBe(1000);
  });

  it("operations refuse a bad count (400), a string-only generator for numeric ids (400), an unknown name (404)", async () => {
    for (const count of ["0", "1001", "abc", "-1"]) {
      const res = await call("GET", `/actuator/idgenGenerator/snowflake?count=${count}`, admin);
      expect(res.statusCode, count).toBe(400);
      expect(res.json().message).toContain("from 1 to 1000");
    }
    const composite = await call("GET", "/actuator/idgenGenerator/idgen", admin);
    expect(composite.statusCode).toBe(400);
    expect(composite.json().message).toContain("/actuator/idgenStringGenerator/idgen");
    expect((await call("GET", "/actuator/idgenGenerator/nope", admin)).statusCode).toBe(404);
  });

  it("DELETE needs an admin; it removes the generator and stops its prefetch", async () => {
    expect((await call("DELETE", "/actuator/idgen/order")).statusCode).toBe(401);
    expect((await call("DELETE", "/actuator/idgen/order", user)).statusCode).toBe(403);
    const chain = proc.monitor!.idgen.registry.get("order");
    const removed = await call("DELETE", "/actuator/idgen/order", admin);
    expect(removed.statusCode).toBe(200);
    expect(removed.json()).toMatchObject({ name: "order", kind: "SegmentChainId" });
    expect(chain.describe().state.stopped).toBe(true);
    expect((await call("GET", "/actuator/idgen/order")).statusCode).toBe(404);
    expect((await call("DELETE", "/actuator/idgen/order", admin)).statusCode).toBe(404);
    expect((await call("GET", "/actuator/idgen/invoice")).json().state.stopped).toBe(false);
  });
});

describe("show-details and bad settings", () => {
  it("always shows details to anyone; never hides them from admins too", async () => {
    for (const [mode, anonymousSees, adminSees] of [["always", true, true], ["never", false, false]] as const) {
      const proc = await process({ MANAGEMENT_ENDPOINT_HEALTH_SHOW_DETAILS: mode });
      const anonymous = (await proc.management.inject({ url: "/actuator/health" })).json().components.machineId;
      const adm = (await proc.management.inject({ url: "/actuator/health", headers: admin })).json().components.machineId;
      expect("details" in anonymous, mode).toBe(anonymousSees);
      expect("details" in adm, mode).toBe(adminSees);
      await proc.shutdown();
    }
  });

  it("an unknown management path names only the endpoints this listener exposes", async () => {
    const proc = await process({ MANAGEMENT_ENDPOINTS_WEB_EXPOSURE_INCLUDE: "health" });
    try {
      const res = await proc.management.inject({ url: "/actuator/nothing" });
      expect([res.statusCode, res.json().message]).toEqual([404, expect.stringMatching(/on the management port: use \/actuator\/health, .* or \/metrics$/)]);
      expect(res.json().message).not.toContain("/actuator/idgen"); // not exposed: it was offered anyway
    } finally {
      await proc.shutdown();
    }
  });

  it("a bad monitor or idgen setting stops startup with its name", async () => {
    await expect(process({ MANAGEMENT_ENDPOINTS_WEB_EXPOSURE_INCLUDE: "health,shell" })).rejects.toThrow(/management\.endpoints\.web\.exposure\.include/);
    await expect(process({ MANAGEMENT_ENDPOINT_HEALTH_SHOW_DETAILS: "sometimes" })).rejects.toThrow(/management\.endpoint\.health\.show-details/);
    await expect(process({ MANAGEMENT_TOKEN: "short" })).rejects.toThrow(/management\.token/);
    await expect(process({ IDGEN_MACHINE_GUARDER_DELAY: "soon" })).rejects.toThrow(/idgen\.machine\.guarder\.delay/);
  });

  it("idgen settings come from the YAML file too, and idgen.namespace overrides the application name", async () => {
    const dir = mkdtempSync(join(tmpdir(), "idgen-monitor-"));
    writeFileSync(join(dir, "gov.yaml"), "idgen:\n  namespace: orders-east\n  snowflake:\n    converter: radix36\n");
    const { readSettingsSources } = await import("@gov/settings");
    const proc = await buildProcess({ name: "gov.config-service", modules: [configModule], sources: readSettingsSources({ GOV_CONFIG: join(dir, "gov.yaml"), GOV_SHUTDOWN_GRACE: "1s" }) });
    expect(proc.monitor!.idgen.config.namespace).toBe("orders-east");
    expect(proc.monitor!.idgen.config.snowflake.converter).toBe("radix36");
    await proc.shutdown();
  });
});
