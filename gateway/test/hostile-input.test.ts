import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ConfigService } from "@gov/api";
import { configRoutes, createConfigService, createMemoryConfigStore } from "@gov/config-service";
import { createH2cServer, createLogger, errorInterceptor, serveConnect, type ConnectServer } from "@gov/service-kit";
import { describeHostileInput, type HostileTarget } from "@gov/testkit/hostile-input";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildGateway, inProcessTransport } from "../src/index.js";
import { TEST_LIMITS } from "./harness.js";

// The all-in-one wiring (REST + Connect + gRPC-Web on one port, gRPC on h2c) with a short request timeout, so that
// slow-body attacks are cut within the test's time. The harness's createTestGateway takes it once the runner reads
// gov.limits.request-timeout; until then the same pieces are put together here.
const REQUEST_TIMEOUT_MS = 1500;
const MAX_JSON_BODY = 128 * 1024;
const READ_MAX_BYTES = TEST_LIMITS.maxZipBytes + 1024;
const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

let target: HostileTarget | undefined;
let serviceTarget: HostileTarget | undefined;
let own: ConnectServer | undefined;
const apps: FastifyInstance[] = [];
const store = createMemoryConfigStore({ maxVersions: 100 });

beforeAll(async () => {
  const impl = createConfigService({ store, namespaceRule: { requireHashTag: true }, limits: TEST_LIMITS });
  const routes = configRoutes(impl);
  const interceptors = [errorInterceptor(logger)];
  const app = await buildGateway({
    services: [{ service: ConfigService, transport: inProcessTransport([{ service: ConfigService, impl }], interceptors) }],
    logger,
    limits: { maxJsonBody: MAX_JSON_BODY, maxZipBytes: TEST_LIMITS.maxZipBytes, requestTimeoutMs: REQUEST_TIMEOUT_MS },
    connect: { routes, interceptors },
  });
  const grpc = await createH2cServer({ routes, interceptors, logger, readMaxBytes: READ_MAX_BYTES, readMaxBytesSetting: "gov.limits.zip-upload, plus 1 KiB", requestTimeoutMs: REQUEST_TIMEOUT_MS });
  apps.push(app, grpc);
  await app.listen({ port: 0, host: "127.0.0.1" });
  await grpc.listen({ port: 0, host: "127.0.0.1" });
  const url = (a: FastifyInstance) => `http://127.0.0.1:${(a.server.address() as { port: number }).port}`;
  target = { restUrl: url(app), connectUrl: url(app), grpcUrl: url(grpc) };
  // The config service as its own process serves it (serveConnect: Connect + gRPC-Web on h1, gRPC on h2c).
  own = await serveConnect({ routes, interceptors, logger, port: 0, grpcPort: 0, readMaxBytes: READ_MAX_BYTES, readMaxBytesSetting: "gov.limits.zip-upload, plus 1 KiB", requestTimeoutMs: REQUEST_TIMEOUT_MS });
  serviceTarget = { restUrl: "", connectUrl: own.url, grpcUrl: own.grpcUrl };
});

afterAll(async () => {
  await own?.close();
  for (const app of apps) await app.close();
  await store.close();
});

describeHostileInput("config service (all-in-one, embedded store)", {
  service: ConfigService,
  target: () => target!,
  pathValues: { namespace: "{hostile}", config_id: "app.yaml", version: "1", target_version: "1" },
  limits: { restBody: MAX_JSON_BODY, message: READ_MAX_BYTES, requestTimeoutMs: REQUEST_TIMEOUT_MS },
});

describeHostileInput("config service (its own process's listeners)", {
  service: ConfigService,
  rest: false,
  target: () => serviceTarget!,
  limits: { restBody: MAX_JSON_BODY, message: READ_MAX_BYTES, requestTimeoutMs: REQUEST_TIMEOUT_MS },
});

describe("the request timeout cuts slow requests, not long answers", () => {
  it("a watch (SSE over REST, Connect streams over HTTP/1.1 and h2c) outlives the request timeout and still delivers", async () => {
    const { restUrl, connectUrl, grpcUrl } = target!;
    const ns = "{outlive}";
    const base = `${restUrl}/v1/namespaces/${encodeURIComponent(ns)}/configs`;
    await fetch(`${base}/w`, { method: "PUT", body: "v1" });
    const stop = new AbortController();
    const sse = await fetch(`${base}/w/watch`, { signal: stop.signal });
    expect(sse.status).toBe(200);
    const reader = sse.body!.getReader();
    const streams = [
      createClient(ConfigService, createConnectTransport({ baseUrl: connectUrl, httpVersion: "1.1" })),
      createClient(ConfigService, createGrpcTransport({ baseUrl: grpcUrl })),
    ].map((c) => c.watchConfig({ namespace: ns, configId: "w" }, { signal: stop.signal })[Symbol.asyncIterator]());
    for (const s of streams) await s.next(); // the current state
    // Longer than the request timeout plus Node's 1 s check: a watch cut by it would be gone by now.
    await new Promise((resolve) => setTimeout(resolve, REQUEST_TIMEOUT_MS * 2 + 1000));
    await fetch(`${base}/w`, { method: "PUT", body: "v2" });
    for (const s of streams) {
      let change = await s.next();
      while (!change.done && change.value.config?.data !== "v2") change = await s.next();
      expect(change.value?.config?.data).toBe("v2");
      await s.return?.();
    }
    let text = "";
    while (!text.includes("v2")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toContain("v2");
    stop.abort();
  }, 30_000);
});
