import { setMaxListeners } from "node:events";
import net from "node:net";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus as Serving } from "@gov/api/gen/health/v1/health_pb";
import { ConfigService } from "@gov/api";
import { createConfigModule } from "@gov/config-service";
import { admitsInTurns, buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { restGateway } from "../src/index.js";
import { createTestGateway, ns, seg, testSources, type TestGateway } from "./harness.js";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
const free = { port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" };

describe("one runner: all-in-one and split from the same modules", () => {
  const open: BuiltProcess[] = [];
  afterEach(async () => {
    for (const p of open.splice(0).reverse()) await p.shutdown();
  });

  it("all-in-one: the config module runs in the process, behind REST, Connect and gRPC", async () => {
    const proc = await buildProcess({ name: "test", modules: [createConfigModule()], gateway: restGateway, sources: testSources(), logger });
    open.push(proc);
    expect(proc.modules).toEqual([{ name: "config", local: true, describe: expect.stringMatching(/^embedded/) }]);
    const urls = await proc.listen(free);
    expect(urls.grpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    // a burst of new streams on one connection is started a few milliseconds' worth per turn (request-admission.ts)
    expect([admitsInTurns(proc.http.server), admitsInTurns(proc.grpc!.server)]).toEqual([true, true]);
    const url = `${urls.url}/v1/namespaces/${seg(ns("aio"))}/configs/a.yaml`;
    expect(await (await fetch(url, { method: "PUT", body: "k: v" })).json()).toBe(true);
    expect((await (await fetch(url)).json()).data).toBe("k: v");
  });

  it("split: a config-service process and a gateway process that reaches it over HTTP by gov.config-service.url", async () => {
    const service = await buildProcess({ name: "test-config", modules: [createConfigModule()], sources: testSources({ GOV_CONFIG_SERVICE_PORT: "0", GOV_CONFIG_SERVICE_GRPC_PORT: "0" }), logger });
    open.push(service);
    const serviceUrls = await service.listen({ managementPort: 0 });
    const gateway = await buildProcess({ name: "test-gw", modules: [createConfigModule()], gateway: restGateway, sources: testSources({ GOV_CONFIG_SERVICE_URL: serviceUrls.url }), logger });
    open.push(gateway);
    expect(gateway.modules).toEqual([{ name: "config", local: false, url: serviceUrls.url, describe: `remote config service at ${serviceUrls.url}` }]);
    const urls = await gateway.listen(free);
    expect(urls.grpcUrl).toBeUndefined(); // nothing runs in the gateway process, so there is nothing to serve over gRPC

    const n = ns("split");
    const put = await fetch(`${urls.url}/v1/namespaces/${seg(n)}/configs/a.yaml`, { method: "PUT", body: "over the wire" });
    expect(await put.json()).toBe(true);
    // The write landed in the service process: read it there directly, over Connect.
    const direct = createClient(ConfigService, createConnectTransport({ baseUrl: serviceUrls.url, httpVersion: "1.1" }));
    expect((await direct.getConfig({ namespace: n, configId: "a.yaml" })).config?.data).toBe("over the wire");
    // The service counted the call as a Connect call; the gateway counted the call it made, as remote.
    const scrape = await (await fetch(`${serviceUrls.managementUrl}/metrics`)).text();
    expect(scrape).toMatch(/gov_rpc_requests_total\{service="gov\.config\.v1\.ConfigService",method="SetConfig",protocol="connect",code="ok"\} 1/);
    const gatewayScrape = await (await fetch(`${urls.managementUrl}/metrics`)).text();
    expect(gatewayScrape).toMatch(/gov_rpc_requests_total\{service="gov\.config\.v1\.ConfigService",method="SetConfig",protocol="remote",code="ok"\} 1/);
    expect(gatewayScrape).toMatch(/gov_rpc_duration_seconds_count\{service="gov\.config\.v1\.ConfigService",method="SetConfig",protocol="remote",code="ok"\} 1/);
    expect(gatewayScrape).not.toContain('protocol="connect"');
  });

  it("many open watches are no 'possible memory leak' warning: each waits on the shutdown signal with its own listener", async () => {
    const proc = await buildProcess({ name: "test", modules: [createConfigModule()], gateway: restGateway, sources: testSources(), logger });
    open.push(proc);
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on("warning", onWarning);
    const stop = new AbortController();
    setMaxListeners(0, stop.signal); // the test's own signal ends all 50 calls
    try {
      const client = createClient(ConfigService, proc.transportFor(ConfigService));
      const n = ns("many");
      const watches = Array.from({ length: 50 }, () => client.watchConfig({ namespace: n, configId: "a.yaml" }, { signal: stop.signal })[Symbol.asyncIterator]());
      for (const w of watches) await w.next(); // the current state; each now waits for the next change
      const pending = watches.map((w) => w.next().catch(() => undefined));
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      expect(warnings.map((w) => w.message)).toEqual([]);
      stop.abort();
      await Promise.all(pending);
    } finally {
      process.off("warning", onWarning);
    }
  });

  it("a process with its only module configured as remote refuses to start, naming the setting", async () => {
    await expect(buildProcess({ name: "test", modules: [createConfigModule()], sources: testSources({ GOV_CONFIG_SERVICE_URL: "http://127.0.0.1:1" }), logger })).rejects.toThrow(
      /nothing to run: gov\.config-service\.url is set/,
    );
  });
});

/** Sends `send` on a raw connection (then `drip` every 100 ms, if given) and returns all the server wrote before closing. */
function rawExchange(url: string, send: string, drip?: string, timeoutMs = 10_000): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let received = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server did not close the connection within ${timeoutMs} ms`));
    }, timeoutMs);
    const dripping = drip ? setInterval(() => socket.writable && socket.write(drip), 100) : undefined;
    socket.on("connect", () => socket.write(send));
    socket.on("data", (d) => (received += d.toString("latin1")));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearTimeout(timer);
      clearInterval(dripping);
      resolve(received);
    });
  });
}
const statusAndBody = (answer: string) => [Number(answer.split(" ")[1]), JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))];

describe("management listener", () => {
  let gw: TestGateway;
  let urls: { url: string; managementUrl: string };
  beforeAll(async () => {
    gw = await createTestGateway(undefined, undefined, true, { GOV_LIMITS_REQUEST_TIMEOUT: "1s" });
    urls = await gw.listen();
  });
  afterAll(() => gw?.close());

  it("/actuator/health and its liveness and readiness groups answer UP", async () => {
    const health = await fetch(`${urls.managementUrl}/actuator/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({
      status: "UP",
      components: {
        liveness: { status: "UP" },
        // details only for authorized callers (management.endpoint.health.show-details=when-authorized)
        readiness: { status: "UP", components: { config: { status: "UP" }, idgen: { status: "UP" } } },
        machineId: { status: "UP" },
      },
    });
    const live = await fetch(`${urls.managementUrl}/actuator/health/liveness`);
    expect([live.status, await live.json()]).toEqual([200, { status: "UP" }]);
    const ready = await fetch(`${urls.managementUrl}/actuator/health/readiness`);
    expect([ready.status, (await ready.json()).status]).toEqual([200, "UP"]);
    const unknown = await fetch(`${urls.managementUrl}/nope`);
    expect([unknown.status, (await unknown.json()).code]).toEqual([404, "not_found"]);
    const wrong = await fetch(`${urls.managementUrl}/actuator/health`, { method: "POST" });
    expect([wrong.status, wrong.headers.get("allow")?.split(/,\s*/).includes("GET"), (await wrong.json()).code]).toEqual([405, true, "unimplemented"]);
    const long = await fetch(`${urls.managementUrl}/actuator/${"x".repeat(15_000)}`, { method: "POST" });
    expect([long.status, (await long.text()).length < 500]).toEqual([404, true]); // the path is not echoed whole
  });

  it("refuses like every other listener, in the contract's {code, message} shape: a body, a bad escape, a slow request, non-HTTP", async () => {
    const body = await fetch(`${urls.managementUrl}/actuator/idgen/nothing`, { method: "DELETE", body: "x".repeat(4096), headers: { "content-type": "application/json" } });
    expect([body.status, await body.json()]).toEqual([413, { code: "resource_exhausted", message: expect.stringMatching(/limit of 1024 bytes/) }]);
    // on a path with no route for the method, that is what to fix first, whatever the body
    const wrongWithBody = await fetch(`${urls.managementUrl}/actuator/health`, { method: "POST", body: "x".repeat(4096), headers: { "content-type": "application/json" } });
    expect([wrongWithBody.status, (await wrongWithBody.json()).code]).toEqual([405, "unimplemented"]);
    const escape = await fetch(`${urls.managementUrl}/actuator/bad%zzescape`);
    const refused = await escape.json();
    expect([escape.status, refused.code]).toEqual([400, "invalid_argument"]);
    expect(refused.message).not.toContain("bad%zz");
    // gov.limits.request-timeout (1 s here) holds on the management port too: headers that trickle in are cut.
    const slow = await rawExchange(urls.managementUrl, "GET /actuator/health HTTP/1.1\r\nHost: x\r\n", "X-Slow: 1\r\n");
    expect(statusAndBody(slow)).toEqual([408, { code: "deadline_exceeded", message: expect.stringMatching(/within 1 s \(gov\.limits\.request-timeout\)/) }]);
    expect(statusAndBody(await rawExchange(urls.managementUrl, "NOT HTTP AT ALL\r\n\r\n"))).toEqual([400, { code: "invalid_argument", message: expect.any(String) }]);
  });

  it("/metrics has process metrics and a counter and latency histogram per RPC, labelled service, method, protocol, code", async () => {
    const n = ns("metrics");
    await fetch(`${urls.url}/v1/namespaces/${seg(n)}/configs/a.yaml`); // REST → in-process: not_found
    const rpc = await fetch(`${urls.url}/gov.config.v1.ConfigService/ListConfigs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ namespace: n }),
    });
    expect(rpc.status).toBe(200);
    const res = await fetch(`${urls.managementUrl}/metrics`);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toMatch(/^process_cpu_user_seconds_total \d/m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds \d/m);
    expect(text).toMatch(/gov_rpc_requests_total\{service="gov\.config\.v1\.ConfigService",method="GetConfig",protocol="in-process",code="not_found"\} 1/);
    expect(text).toMatch(/gov_rpc_requests_total\{service="gov\.config\.v1\.ConfigService",method="ListConfigs",protocol="connect",code="ok"\} 1/);
    expect(text).toMatch(/gov_rpc_duration_seconds_count\{service="gov\.config\.v1\.ConfigService",method="ListConfigs",protocol="connect",code="ok"\} 1/);
    expect(text).toMatch(/gov_rpc_duration_seconds_bucket\{le="\+Inf",service="gov\.config\.v1\.ConfigService",method="ListConfigs",protocol="connect",code="ok"\} 1/);
  });

  it("/metrics counts a watch the client cancelled as canceled, not ok", async () => {
    const client = createClient(ConfigService, createConnectTransport({ baseUrl: urls.url, httpVersion: "1.1" }));
    const abort = new AbortController();
    const ops: string[] = [];
    await (async () => {
      for await (const change of client.watchConfig({ namespace: ns("metrics-cancel"), configId: "a.yaml" }, { signal: abort.signal })) {
        ops.push(change.op);
        abort.abort();
      }
    })().catch(() => undefined);
    expect(ops).toEqual(["current"]);
    const series = /gov_rpc_requests_total\{service="gov\.config\.v1\.ConfigService",method="WatchConfig",protocol="connect",code="(\w+)"\} 1/;
    let code: string | undefined;
    for (let i = 0; i < 50 && code === undefined; i++) {
      code = series.exec(await (await fetch(`${urls.managementUrl}/metrics`)).text())?.[1];
      if (code === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(code).toBe("canceled");
  });
});

describe.skipIf(inject("redisSkipReason"))("readiness follows the store", () => {
  let redis: RedisServer;
  let gw: TestGateway;
  let managementUrl: string;
  let grpcUrl: string;
  beforeAll(async () => {
    redis = await startRedis();
    // details for everyone, so that the module's reason can be read without credentials
    gw = await createTestGateway(undefined, undefined, true, { REDIS_URL: redis.url, MANAGEMENT_ENDPOINT_HEALTH_SHOW_DETAILS: "always" });
    ({ managementUrl, grpcUrl } = await gw.listen());
  });
  afterAll(async () => {
    await gw?.close();
    await redis?.stop();
  });

  it("readiness (and grpc.health.v1) is DOWN while Redis is stopped, liveness stays UP, and all is UP again when Redis returns", async () => {
    const health = createClient(Health, createGrpcTransport({ baseUrl: grpcUrl }));
    const readiness = async () => {
      const r = await fetch(`${managementUrl}/actuator/health/readiness`);
      return { status: r.status, body: await r.json() };
    };
    expect((await readiness()).status).toBe(200);
    await redis.stop();
    await expect.poll(async () => (await readiness()).status, { timeout: 10_000, interval: 100 }).toBe(503);
    const down = await readiness();
    expect(down.body).toMatchObject({ status: "DOWN", components: { config: { status: "DOWN", details: { store: "redis", reason: expect.stringMatching(/Redis is unreachable/) } } } });
    expect((await fetch(`${managementUrl}/actuator/health/liveness`)).status).toBe(200);
    expect((await fetch(`${managementUrl}/actuator/health`)).status).toBe(503);
    expect((await health.check({ service: "" })).status).toBe(Serving.NOT_SERVING);
    await redis.start();
    await expect.poll(async () => (await readiness()).status, { timeout: 10_000, interval: 100 }).toBe(200);
    expect((await health.check({ service: "gov.config.v1.ConfigService" })).status).toBe(Serving.SERVING);
  });
});

describe("logs", () => {
  /** A logger that keeps its JSON lines in memory. */
  const memoryLogger = () => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger("test", "info", { write: (line: string) => void lines.push(JSON.parse(line)) });
    return { lines, logger };
  };

  it("gov.log.access=true logs one line per HTTP request; it is off by default", async () => {
    for (const access of [undefined, "true"]) {
      const { lines, logger: log } = memoryLogger();
      const proc = await buildProcess({ name: "test", modules: [createConfigModule()], gateway: restGateway, sources: testSources(access ? { GOV_LOG_ACCESS: access } : {}), logger: log });
      try {
        const { url } = await proc.listen(free);
        expect((await fetch(`${url}/v1/namespaces/${seg(ns("access"))}/configs`)).status).toBe(200);
        const requests = () => lines.filter((l) => l.msg === "request completed");
        if (!access) {
          expect(requests()).toEqual([]);
          continue;
        }
        await expect.poll(() => requests().length).toBe(1);
        expect(requests()[0]).toMatchObject({ level: 30, req: { method: "GET", url: expect.stringMatching(/^\/v1\/namespaces\/.*\/configs$/) }, res: { statusCode: 200 }, responseTime: expect.any(Number) });
        // what Node refuses before a request exists (answered 400 here; a request that does not arrive in time, 408)
        const socket = net.connect(Number(new URL(url).port), "127.0.0.1");
        const answer = await new Promise<string>((resolve) => {
          let text = "";
          socket.on("data", (d) => (text += d)).on("close", () => resolve(text));
          socket.write("NOT HTTP AT ALL\r\n\r\n");
        });
        expect(answer).toMatch(/^HTTP\/1\.1 400 /);
        await expect.poll(() => requests().length).toBe(2);
        expect(requests()[1]).toMatchObject({ req: { remoteAddress: expect.any(String) }, res: { statusCode: 400 }, err: { code: expect.stringMatching(/^HPE_/) } });
      } finally {
        await proc.shutdown();
      }
    }
  });

  it("credentials are written as ***", () => {
    const { lines, logger: log } = memoryLogger();
    log.info({ req: { headers: { authorization: "Bearer secret-token", cookie: "s=1", accept: "*/*" } }, options: { password: "hunter2" }, token: "t" }, "x");
    expect(lines[0]).toMatchObject({ req: { headers: { authorization: "***", cookie: "***", accept: "*/*" } }, options: { password: "***" }, token: "***" });
  });
});
