import { spawn } from "node:child_process";
import http from "node:http";
import http2 from "node:http2";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ConfigService } from "@gov/api";
import { Health, HealthCheckResponse_ServingStatus as Serving } from "@gov/api/gen/health/v1/health_pb";
import { buildProcess, createLogger, type ServiceModule } from "@gov/service-kit";
import { describe, expect, it } from "vitest";
import { createTestGateway, ns, seg, testSources } from "./harness.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");

/** Reads a stream to its end and says how it ended: "end", or the error's Connect code and message. */
async function outcome(iterable: AsyncIterable<unknown>, first: () => void): Promise<string> {
  try {
    for await (const _ of iterable) first();
    return "end";
  } catch (err) {
    const e = ConnectError.from(err);
    return `${Code[e.code]}: ${e.rawMessage}`;
  }
}

describe("SIGTERM (the real `npm start` process)", () => {
  it("ends open gRPC, Connect and SSE watches cleanly, exits within gov.shutdown.grace, and keeps stdout JSON", async () => {
    const env = { ...process.env, PORT: "0", GOV_GRPC_PORT: "0", MANAGEMENT_SERVER_PORT: "0", HOST: "127.0.0.1", REDIS_URL: "", GOV_CONFIG: "", GOV_SECURITY_ENABLED: "false", GOV_SHUTDOWN_GRACE: "8s", GOV_LOG_LEVEL: "info" };
    const child = spawn(process.execPath, ["--import", "tsx", join(root, "apps/main.ts")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    try {
      await expect.poll(() => stderr, { timeout: 20_000, interval: 100 }).toMatch(/Management on/);
      const url = /listening on (http:\/\/\S+)/.exec(stderr)![1];
      const grpcUrl = /gRPC \(h2c\) on (http:\/\/\S+)/.exec(stderr)![1];
      const managementUrl = /Management on (http:\/\/\S+)/.exec(stderr)![1];
      const n = ns("sigterm");
      const req = { namespace: n, configId: "app.yaml" };
      expect(await (await fetch(`${url}/v1/namespaces/${seg(n)}/configs/app.yaml`, { method: "PUT", body: "a: 1" })).json()).toBe(true);

      // Three watches, each open (its first message, the current state, received) before the signal.
      const seen = { grpc: 0, connect: 0, sse: 0 };
      const grpc = outcome(createClient(ConfigService, createGrpcTransport({ baseUrl: grpcUrl })).watchConfig(req), () => seen.grpc++);
      const connect = outcome(createClient(ConfigService, createConnectTransport({ baseUrl: url, httpVersion: "1.1" })).watchConfig(req), () => seen.connect++);
      const sseResponse = await fetch(`${url}/v1/namespaces/${seg(n)}/configs/app.yaml/watch`);
      const decoder = new TextDecoder();
      let sseText = "";
      const sse = (async () => {
        try {
          for await (const chunk of sseResponse.body!) sseText += decoder.decode(chunk as Uint8Array, { stream: true });
          return "end";
        } catch (err) {
          return `failed: ${(err as Error).message}`;
        }
      })();
      // and a grpc.health.v1 Watch, which must hear NOT_SERVING before its stream ends (a load balancer's cue)
      const health: Serving[] = [];
      const healthSeen = (async () => {
        try {
          for await (const r of createClient(Health, createGrpcTransport({ baseUrl: grpcUrl })).watch({ service: "" })) health.push(r.status);
        } catch {
          // ends with unavailable, as every stream at shutdown
        }
      })();
      await expect.poll(() => [seen.grpc, seen.connect, /^data: /m.test(sseText), health.length], { timeout: 10_000, interval: 50 }).toEqual([1, 1, true, 1]);

      const started = Date.now();
      child.kill("SIGTERM");
      // Every client sees a clean end: `unavailable` ("go elsewhere") from the server, not a reset connection.
      // (A reset or a closed socket would be an `unavailable` too, but without the server's message.)
      expect(await grpc).toMatch(/^Unavailable: the server is shutting down/);
      expect(await connect).toMatch(/^Unavailable: the server is shutting down/);
      expect(await sse).toBe("end");
      expect(sseText).toMatch(/event: error\ndata: \{"code":"unavailable","message":"the server is shutting down[^"]*"\}/);
      await healthSeen;
      expect(health).toEqual([Serving.SERVING, Serving.NOT_SERVING]);
      expect(await exited).toBe(0);
      const tookMs = Date.now() - started;
      expect(tookMs).toBeLessThan(8_000);
      if (process.env.SHOW_TIMINGS) console.info(`SIGTERM → exit: ${tookMs} ms`);
      // Nothing listens any more, the management port included.
      await expect(fetch(`${managementUrl}/actuator/health/liveness`)).rejects.toThrow();
    } finally {
      child.kill("SIGKILL");
      await exited;
    }
    // stdout is for the log collector: JSON lines only (the banner went to stderr, as stdout is not a terminal).
    const lines = stdout.split("\n").filter(Boolean);
    expect(lines.length).toBeGreaterThan(2);
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(expect.arrayContaining(["listening", "stopped"]));
    expect(stderr).toMatch(/Governance platform listening on/);
  });
});

describe("graceful shutdown of a built process", () => {
  /** A process whose one module's GetConfig waits until the test releases it. */
  async function slowProcess(grace: string) {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inHandler = new Promise<void>((r) => (entered = r));
    let calls = 0;
    const slow: ServiceModule = {
      name: "slow",
      services: [ConfigService],
      settings: {},
      ports: { port: 0, grpcPort: 0 },
      async create() {
        const impl = {
          async getConfig(req: { configId: string }) {
            calls++;
            entered();
            await gate;
            return { config: { configId: req.configId, data: "finished" } };
          },
        };
        return { impls: [{ service: ConfigService, impl: impl as never }], health: () => ({ status: "UP" as const }), close: async () => {} };
      },
    };
    const sources = testSources({ GOV_SLOW_SERVICE_PORT: "0", GOV_SLOW_SERVICE_GRPC_PORT: "0", GOV_SHUTDOWN_GRACE: grace });
    const proc = await buildProcess({ name: "test", modules: [slow], sources, logger: createLogger("test", "silent") });
    const urls = await proc.listen({ managementPort: 0 });
    const client = createClient(ConfigService, createConnectTransport({ baseUrl: urls.url, httpVersion: "1.1" }));
    const call = client.getConfig({ namespace: "{x}", configId: "slow.yaml" });
    call.catch(() => {});
    await inHandler;
    return { proc, urls, call, release, inHandler: () => calls };
  }

  it("readiness turns DOWN at once, an in-flight unary call finishes, new connections are refused, then everything closes", async () => {
    const { proc, urls, call, release } = await slowProcess("10s");
    let stopped = false;
    const stopping = proc.shutdown().then(() => (stopped = true));
    const readiness = await fetch(`${urls.managementUrl}/actuator/health/readiness`);
    expect([readiness.status, (await readiness.json()).components.shutdown.status]).toEqual([503, "DOWN"]);
    await expect(fetch(`${urls.url}/gov.config.v1.ConfigService/GetConfig`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).rejects.toThrow();
    expect(stopped).toBe(false); // waiting for the call in flight

    release();
    expect((await call).config?.data).toBe("finished");
    await stopping;
    expect(stopped).toBe(true);
  });

  it("answers a request sent on an open keep-alive connection just after shutdown began, closing that connection; a new connection is refused", async () => {
    const { proc, urls, call, release } = await slowProcess("10s");
    release();
    await call;
    // A client's pooled connection, idle when the process starts to stop (a gateway's to a service, between calls).
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const getConfig = () =>
      new Promise<{ status?: number; connection?: string }>((resolve, reject) => {
        const req = http.request(`${urls.url}/gov.config.v1.ConfigService/GetConfig`, { method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
          res.resume();
          res.on("end", () => resolve({ status: res.statusCode, connection: res.headers.connection }));
        });
        req.on("error", reject);
        req.end(JSON.stringify({ namespace: "{x}", configId: "a.yaml" }));
      });
    try {
      expect(await getConfig()).toEqual({ status: 200, connection: "keep-alive" });
      const stopping = proc.shutdown();
      // the request comes a moment after, once readiness says DOWN (a connection closed idle at once reset it)
      expect((await fetch(`${urls.managementUrl}/actuator/health/readiness`)).status).toBe(503);
      expect(await getConfig()).toEqual({ status: 200, connection: "close" });
      await expect(fetch(`${urls.url}/gov.config.v1.ConfigService/GetConfig`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).rejects.toThrow();
      await stopping;
    } finally {
      agent.destroy();
    }
  });

  it("a call in flight when shutdown begins is answered with Connection: close, so its client does not send on that connection again", async () => {
    const { proc, urls, call, release, inHandler } = await slowProcess("10s");
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // a second slow call, on a pooled connection of its own
      const inFlight = new Promise<{ status?: number; connection?: string }>((resolve, reject) => {
        const req = http.request(`${urls.url}/gov.config.v1.ConfigService/GetConfig`, { method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
          res.resume();
          res.on("end", () => resolve({ status: res.statusCode, connection: res.headers.connection }));
        });
        req.on("error", reject);
        req.end(JSON.stringify({ namespace: "{x}", configId: "b.yaml" }));
      });
      await expect.poll(inHandler).toBe(2); // both calls are in their handler
      const stopping = proc.shutdown();
      expect((await fetch(`${urls.managementUrl}/actuator/health/readiness`)).status).toBe(503);
      release();
      expect(await inFlight).toEqual({ status: 200, connection: "close" });
      await call;
      await stopping;
    } finally {
      agent.destroy();
    }
  });

  it("an upload whose body is still arriving when shutdown begins is a call in flight: it is answered, not refused as shutting down", async () => {
    const gw = await createTestGateway(undefined, undefined, true, { GOV_SHUTDOWN_GRACE: "10s" });
    const urls = await gw.listen();
    const body = "slow: upload\n";
    const answered = new Promise<{ status?: number; text: string }>((resolve, reject) => {
      const req = http.request(`${urls.url}/v1/namespaces/${seg(ns("up"))}/configs/up.yaml`, { method: "PUT", headers: { "content-type": "text/plain", "content-length": String(body.length) } }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode, text }));
      });
      req.on("error", reject);
      req.write(body.slice(0, 5)); // headers and the first bytes: the rest comes after the shutdown began
      void expect
        .poll(async () => (await fetch(`${urls.managementUrl}/actuator/health/readiness`)).status)
        .toBe(503)
        .then(() => new Promise((r) => setTimeout(r, 400))) // past the linger's 100 ms of quiet
        .then(() => req.end(body.slice(5)));
    });
    await new Promise((r) => setTimeout(r, 100)); // the request's headers are in
    const stopping = gw.proc.shutdown();
    expect(await answered).toEqual({ status: 200, text: "true" });
    await stopping;
  });

  it("on the gRPC port too: a call whose request is still arriving when shutdown begins is answered; new streams go elsewhere (GOAWAY)", async () => {
    const gw = await createTestGateway(undefined, undefined, true, { GOV_SHUTDOWN_GRACE: "10s" });
    const urls = await gw.listen();
    const session = http2.connect(urls.grpcUrl);
    session.on("error", () => {});
    let goaway = false;
    session.once("goaway", () => (goaway = true));
    try {
      const body = JSON.stringify({ namespace: ns("h2up"), configId: "up.yaml", data: "slow: upload\n" });
      const stream = session.request({ ":method": "POST", ":path": "/gov.config.v1.ConfigService/SetConfig", "content-type": "application/json", "content-length": String(body.length) });
      const answered = new Promise<{ status: number; text: string }>((resolve, reject) => {
        let status = 0;
        let text = "";
        stream.on("response", (h) => (status = Number(h[":status"])));
        stream.on("data", (d) => (text += d));
        stream.on("end", () => resolve({ status, text }));
        stream.on("error", reject);
      });
      stream.write(body.slice(0, 5)); // the headers and the first bytes: the rest comes after the shutdown began
      await new Promise((r) => setTimeout(r, 100));
      const stopping = gw.proc.shutdown();
      await expect.poll(() => goaway).toBe(true);
      // and no new connection is taken on the gRPC port meanwhile (a reconnecting client goes elsewhere)
      const refused = await new Promise<string>((resolve) => {
        const again = http2.connect(urls.grpcUrl);
        again.once("connect", () => (again.destroy(), resolve("connected")));
        again.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      });
      expect(refused).toBe("ECONNREFUSED");
      await new Promise((r) => setTimeout(r, 400)); // past the HTTP/1.1 linger's 100 ms of quiet
      stream.end(body.slice(5));
      // before the fix: 503 "the server is shutting down" for a call whose client began it before the signal
      expect(await answered).toEqual({ status: 200, text: JSON.stringify({ changed: true, version: 1 }) });
      await stopping;
    } finally {
      session.destroy();
    }
  });

  it("a call still running when gov.shutdown.grace is over does not hold the process: its connection is closed", async () => {
    const { proc, call, release } = await slowProcess("300ms");
    const started = Date.now();
    await proc.shutdown();
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
    expect(Date.now() - started).toBeLessThan(5_000);
    await expect(call).rejects.toThrow(ConnectError);
    release();
  });
});
