import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { ConfigService } from "@gov/api";
import { configRoutes, createConfigService, createMemoryConfigStore } from "@gov/config-service";
import { createLogger, errorInterceptor, remoteTransport, serveConnect, type ConnectServer } from "@gov/service-kit";
import { createServer, connect, type Server, type Socket } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { buildGateway } from "../src/index.js";
import { ns, seg, TEST_LIMITS } from "./harness.js";

/** A config service (embedded store) in its own Connect server on free ports. */
const serviceOptions = (logger: ReturnType<typeof createLogger>) => ({
  routes: configRoutes(createConfigService({ store: createMemoryConfigStore({ maxVersions: 10 }), namespaceRule: { requireHashTag: true }, limits: TEST_LIMITS })),
  interceptors: [errorInterceptor(logger)],
  port: 0,
  grpcPort: 0,
  logger,
});
const serveConfigService = (logger: ReturnType<typeof createLogger>) => serveConnect(serviceOptions(logger));

/** The split deployment: the config service in its own server, the gateway reaching it over HTTP (GOV_CONFIG_SERVICE_URL). */
describe("gateway → remote config service over HTTP", () => {
  const logger = createLogger("test", "silent");
  let service: ConnectServer;
  let gateway: FastifyInstance;
  beforeAll(async () => {
    service = await serveConfigService(logger);
    gateway = await buildGateway({
      services: [{ service: ConfigService, transport: remoteTransport(service.url) }],
      logger,
      limits: { maxJsonBody: 1 << 20, maxZipBytes: TEST_LIMITS.maxZipBytes },
    });
  });
  afterAll(async () => {
    await gateway?.close();
    await service?.close();
  });

  it("REST calls, errors and the streamed ZIP export all cross the wire intact", async () => {
    const n = ns("remote");
    const url = `/v1/namespaces/${seg(n)}/configs/a%2Fb.yaml`;
    expect((await gateway.inject({ method: "PUT", url, payload: "k: v", headers: { "content-type": "text/plain" } })).json()).toBe(true);
    expect((await gateway.inject({ method: "GET", url })).json()).toMatchObject({ configId: "a/b.yaml", data: "k: v", version: 1 });
    const missing = await gateway.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/none` });
    expect([missing.statusCode, missing.json().code]).toEqual([404, "not_found"]);
    const bad = await gateway.inject({ method: "GET", url: "/v1/namespaces/dev/configs" });
    expect([bad.statusCode, bad.json().code]).toEqual([400, "invalid_argument"]);
    const zip = await gateway.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/export` });
    expect([zip.statusCode, zip.headers["content-type"], zip.rawPayload.subarray(0, 2).toString()]).toEqual([200, "application/zip", "PK"]);
  });

  it("a Connect or gRPC-Web call of the remote service's RPC is told it is served as REST only here, not to check the name", async () => {
    const body = JSON.stringify({ namespace: ns("rpc"), configId: "a" });
    const connect = await gateway.inject({ method: "POST", url: "/gov.config.v1.ConfigService/GetConfig", payload: body, headers: { "content-type": "application/json" } });
    expect([connect.statusCode, connect.json().code]).toEqual([404, "unimplemented"]);
    expect(connect.json().message).toContain("this gateway reaches gov.config.v1.ConfigService over the network and serves it as REST (/v1) only");
    const grpcWeb = await gateway.inject({ method: "POST", url: "/gov.config.v1.ConfigService/GetConfig", payload: Buffer.alloc(5), headers: { "content-type": "application/grpc-web+proto" } });
    expect([grpcWeb.headers["grpc-status"], decodeURIComponent(String(grpcWeb.headers["grpc-message"]))]).toEqual(["12", expect.stringContaining("serves it as REST (/v1) only")]);
    // a method no service has is still a name to check
    const unknown = await gateway.inject({ method: "POST", url: "/gov.config.v1.ConfigService/Nope", payload: body, headers: { "content-type": "application/json" } });
    expect(unknown.json().message).toContain("check the package, service and method name");
  });
});

describe("gateway → a remote service whose message limit is below the gateway's body limit", () => {
  const logger = createLogger("test", "silent");
  let service: ConnectServer;
  let gateway: FastifyInstance;
  beforeAll(async () => {
    service = await serveConnect({ ...serviceOptions(logger), readMaxBytes: 16 * 1024 });
    gateway = await buildGateway({ services: [{ service: ConfigService, transport: remoteTransport(service.url) }], logger, limits: { maxJsonBody: 1 << 20, maxZipBytes: TEST_LIMITS.maxZipBytes } });
  });
  afterAll(async () => {
    await gateway?.close();
    await service?.close();
  });

  it("a body the service's listener refuses as too large is 413 naming the limit, not 429 (retry)", async () => {
    const res = await gateway.inject({ method: "PUT", url: `/v1/namespaces/${seg(ns("big"))}/configs/big.yaml`, payload: "x".repeat(32 * 1024), headers: { "content-type": "text/plain" } });
    expect([res.statusCode, res.json().code]).toEqual([413, "resource_exhausted"]);
    expect(res.json().message).toMatch(/over the limit of 16384 bytes/);
  });
});

describe("gateway → a remote service that accepts connections but never answers (stopped, SIGSTOP)", () => {
  const logger = createLogger("test", "silent");
  let silent: Server;
  const held: Socket[] = [];
  let gateway: FastifyInstance;
  beforeAll(async () => {
    silent = createServer((socket) => void held.push(socket)); // reads nothing, writes nothing
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const { port } = silent.address() as { port: number };
    gateway = await buildGateway({
      services: [{ service: ConfigService, transport: remoteTransport(`http://127.0.0.1:${port}`, { defaultTimeoutMs: 300 }) }],
      logger,
      limits: { maxJsonBody: 1 << 20, maxZipBytes: TEST_LIMITS.maxZipBytes },
      streamStartMs: 300,
    });
  });
  afterAll(async () => {
    await gateway?.close();
    for (const s of held) s.destroy();
    await new Promise((resolve) => silent?.close(resolve));
  });

  it("a watch gets 503 once its start deadline passes, not a response with no status forever", async () => {
    const started = Date.now();
    const res = await gateway.inject({ method: "GET", url: `/v1/namespaces/${seg(ns("mute"))}/configs/app.yaml/watch` });
    expect([res.statusCode, res.json().code]).toEqual([503, "unavailable"]);
    expect(res.json().message).toMatch(/did not start the stream within 0.3 s/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("a write gets 504 saying it may or may not have been applied", async () => {
    const res = await gateway.inject({ method: "PUT", url: `/v1/namespaces/${seg(ns("mute"))}/configs/app.yaml`, payload: "a: 1", headers: { "content-type": "text/plain" } });
    expect([res.statusCode, res.json().code]).toEqual([504, "deadline_exceeded"]);
    expect(res.json().message).toMatch(/did not answer within 300 ms: the write may or may not have been applied/);
  });
});

/**
 * A service that reads a call only after its caller gave up — the service process was paused (SIGSTOP, a frozen VM)
 * past the gateway's deadline, played by a proxy that holds the gateway's bytes back — must not apply it: the gateway
 * has answered 504 "may or may not have been applied", and the write would otherwise land seconds later, after newer
 * ones. Connect's relative `connect-timeout-ms` is counted from the read; the gateway's absolute `x-gov-deadline` is not.
 */
describe("gateway → a remote service that reads the call after the gateway's deadline (paused)", () => {
  const logger = createLogger("test", "silent");
  const HELD_MS = 1_800; // past the gateway's 300 ms and the service's 1 s allowance for clock skew
  let service: ConnectServer;
  let gateway: FastifyInstance;
  let direct: FastifyInstance;
  let proxy: Server;
  let answers = "";
  const sockets = new Set<Socket>();
  beforeAll(async () => {
    service = await serveConfigService(logger);
    proxy = createServer((client) => {
      const upstream = connect(Number(new URL(service.url).port), "127.0.0.1");
      for (const s of [client, upstream]) sockets.add(s.on("error", () => {}));
      const held: Buffer[] = [];
      let released = false;
      client.on("data", (chunk: Buffer) => {
        if (released) return void upstream.write(chunk);
        if (held.length === 0) setTimeout(() => ((released = true), upstream.write(Buffer.concat(held))), HELD_MS);
        held.push(chunk);
      });
      // the service's answers are kept: the gateway has long gone when the late one comes
      upstream.on("data", (chunk: Buffer) => ((answers += chunk.toString("latin1")), client.writable && client.write(chunk)));
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
    const limits = { maxJsonBody: 1 << 20, maxZipBytes: TEST_LIMITS.maxZipBytes };
    gateway = await buildGateway({ services: [{ service: ConfigService, transport: remoteTransport(proxyUrl, { defaultTimeoutMs: 300 }) }], logger, limits });
    direct = await buildGateway({ services: [{ service: ConfigService, transport: remoteTransport(service.url) }], logger, limits });
  });
  afterAll(async () => {
    await gateway?.close();
    await direct?.close();
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => proxy?.close(resolve));
    await service?.close();
  });

  it("a write the service reads after the deadline is refused unread, so the 504's unknown outcome resolves to not applied", async () => {
    const url = `/v1/namespaces/${seg(ns("late"))}/configs/app.yaml`;
    const res = await gateway.inject({ method: "PUT", url, payload: "late: true", headers: { "content-type": "text/plain" } });
    expect([res.statusCode, res.json().code]).toEqual([504, "deadline_exceeded"]);
    expect(res.json().message).toMatch(/may or may not have been applied/);
    // the service read the held call later and answered it (to nobody): refused, with why
    await expect.poll(() => answers, { timeout: 10_000, interval: 50 }).toMatch(/deadline_exceeded/);
    expect(answers).toMatch(/this call reached the service \d+ ms after its caller's deadline .*nothing was done/);
    const read = await direct.inject({ method: "GET", url });
    expect([read.statusCode, read.json().code]).toEqual([404, "not_found"]);
    // in time, the same write through the same proxy-free path is applied as ever
    expect((await direct.inject({ method: "PUT", url, payload: "on time: true", headers: { "content-type": "text/plain" } })).json()).toBe(true);
  });
});

/**
 * The gateway facing a service that restarts or is down: a TCP proxy in front of a real config service resets the next
 * N connections it accepts, or stops listening. Reads are retried a bounded number of times; writes never are.
 */
describe("gateway → a remote service it cannot reach", () => {
  const logger = createLogger("test", "silent");
  let service: ConnectServer;
  let gateway: FastifyInstance;
  let proxy: Server;
  let proxyPort: number;
  let resets = 0;
  let accepted = 0;
  const open = new Set<Socket>();
  const listenProxy = () =>
    new Promise<void>((resolve) => {
      proxy = createServer((client) => {
        accepted++;
        if (resets > 0) {
          resets--;
          client.resetAndDestroy(); // what a killed or restarting service's socket looks like to the gateway
          return;
        }
        const upstream = connect(Number(new URL(service.url).port), "127.0.0.1");
        for (const s of [client, upstream]) {
          open.add(s);
          s.on("error", () => {}).on("close", () => (open.delete(s), client.destroy(), upstream.destroy()));
        }
        client.pipe(upstream).pipe(client);
      });
      proxy.listen(proxyPort ?? 0, "127.0.0.1", () => {
        proxyPort = (proxy.address() as { port: number }).port;
        resolve();
      });
    });
  /** Drops the pooled connections, so that the next call opens a new one (which the proxy may reset). */
  const dropPooled = async () => {
    for (const s of open) s.destroy();
    await vi.waitFor(() => expect(open.size).toBe(0));
    await new Promise((r) => setImmediate(r)); // the gateway's agent sees the close
  };
  const url = (n: string) => `/v1/namespaces/${seg(n)}/configs/app.yaml`;
  const put = (n: string, data: string) => gateway.inject({ method: "PUT", url: url(n), payload: data, headers: { "content-type": "text/plain" } });

  beforeAll(async () => {
    service = await serveConfigService(logger);
    await listenProxy();
    gateway = await buildGateway({
      services: [{ service: ConfigService, transport: remoteTransport(`http://127.0.0.1:${proxyPort}`, { serviceName: "config" }) }],
      logger,
      limits: { maxJsonBody: 1 << 20, maxZipBytes: TEST_LIMITS.maxZipBytes },
    });
  });
  afterAll(async () => {
    for (const s of open) s.destroy();
    proxy?.close();
    await gateway?.close();
    await service?.close();
  });

  it("a watch whose service dies under it ends with unavailable, naming the service and saying to open it again", async () => {
    const n = ns("dies");
    expect((await put(n, "k: 1")).json()).toBe(true);
    const client = createClient(ConfigService, remoteTransport(`http://127.0.0.1:${proxyPort}`, { serviceName: "config" }));
    const watch = client.watchConfig({ namespace: n, configId: "app.yaml" })[Symbol.asyncIterator]();
    expect((await watch.next()).value).toMatchObject({ op: "current" });
    for (const s of open) (s as Socket).resetAndDestroy(); // what a killed service looks like
    const end = await watch.next().then(
      () => undefined,
      (err: unknown) => ConnectError.from(err),
    );
    expect(end?.code).toBe(Code.Unavailable);
    expect(end?.rawMessage).toMatch(/config service .* ended the stream .*open it again/);
  });

  it("retries a read whose connection was reset, at most twice; then 503 naming the service and its URL", async () => {
    const n = ns("resets");
    expect((await put(n, "k: 1")).json()).toBe(true);
    await dropPooled();
    [resets, accepted] = [2, 0];
    const read = await gateway.inject({ method: "GET", url: url(n) });
    expect([read.statusCode, read.json().data, accepted]).toEqual([200, "k: 1", 3]);
    await dropPooled();
    [resets, accepted] = [3, 0];
    const failed = await gateway.inject({ method: "GET", url: url(n) });
    expect([failed.statusCode, failed.json().code, accepted]).toEqual([503, "unavailable", 3]);
    expect(failed.json().message).toMatch(new RegExp(`^config service unreachable at http://127\\.0\\.0\\.1:${proxyPort}: .+ \\(3 attempts\\); retry when it is back$`));
  });

  it("never re-sends a write: a reset after sending is an unknown outcome (504), said so", async () => {
    const n = ns("write-reset");
    await dropPooled();
    [resets, accepted] = [1, 0];
    const res = await put(n, "k: 2");
    expect([res.statusCode, res.json().code, accepted]).toEqual([504, "deadline_exceeded", 1]);
    expect(res.json().message).toMatch(/^the config service at http:\/\/127\.0\.0\.1:\d+ closed the connection before answering \(.+\), so the call may or may not have been applied: read the data back before repeating it$/);
  });

  it("answers 503 for reads and writes while the service is down, and serves again once it is back", async () => {
    const n = ns("down");
    expect((await put(n, "k: 3")).json()).toBe(true);
    await dropPooled();
    await new Promise((r) => proxy.close(r));
    const read = await gateway.inject({ method: "GET", url: url(n) });
    expect([read.statusCode, read.json().code]).toEqual([503, "unavailable"]);
    expect(read.json().message).toMatch(new RegExp(`^config service unreachable at http://127\\.0\\.0\\.1:${proxyPort}: connect ECONNREFUSED .+; retry when it is back$`));
    const write = await put(n, "k: 4");
    expect([write.statusCode, write.json().code]).toEqual([503, "unavailable"]);
    expect(write.json().message).toMatch(/ECONNREFUSED .+; nothing was sent; retry when it is back$/);
    await listenProxy();
    const back = await gateway.inject({ method: "GET", url: url(n) });
    expect([back.statusCode, back.json().data]).toEqual([200, "k: 3"]);
  });
});
