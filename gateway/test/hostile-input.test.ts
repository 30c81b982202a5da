import { connect } from "node:net";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ConfigService } from "@gov/api";
import { createConfigModule, createMemoryConfigStore } from "@gov/config-service";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { describeHostileInput, type HostileTarget } from "@gov/testkit/hostile-input";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestGateway, TEST_LIMITS, testSources, type TestGateway } from "./harness.js";

// A short gov.limits.request-timeout, so that slow-body attacks are cut within the test's time. Configs of 1 MiB, so
// that watchers that never read would cost hundreds of MiB if the server buffered for them; the upload limit above
// it, so that every RPC listener has the same message limit (the larger of the two, plus 1 KiB).
const REQUEST_TIMEOUT_MS = 1500;
const MiB = 1024 * 1024;
const LIMITS = { ...TEST_LIMITS, maxContentBytes: MiB, maxZipBytes: 2 * MiB };
// Each REST body has its own limit, named in its 413: JSON bodies gov.limits.json-body (128 KiB in the test sources),
// a config's raw content gov.limits.config-content.
const REST_BODY = {
  restBody: 128 * 1024,
  restBodySetting: "gov.limits.json-body",
  rawBody: LIMITS.maxContentBytes,
  rawBodySetting: "gov.limits.config-content",
  // an import's JSON body carries the archive in base64: the upload's limit, 4 bytes per 3, and 64 KiB for the rest
  uploadBody: Math.ceil(LIMITS.maxZipBytes / 3) * 4 + 64 * 1024,
  uploadBodySetting: "gov.limits.zip-upload (in base64, in a JSON body)",
};
const READ_MAX_BYTES = LIMITS.maxZipBytes + 1024;
const env = { GOV_LIMITS_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`, GOV_CONFIG_HISTORY_MAX_VERSIONS: "2" };
const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

let gw: TestGateway | undefined;
let target: HostileTarget | undefined;
let own: BuiltProcess | undefined;
let serviceTarget: HostileTarget | undefined;

beforeAll(async () => {
  // The all-in-one process of `npm start`: REST + Connect + gRPC-Web on one port, gRPC on h2c.
  gw = await createTestGateway(createMemoryConfigStore({ maxVersions: 2 }), LIMITS, true, env);
  const urls = await gw.listen();
  target = { restUrl: urls.url, connectUrl: urls.url, grpcUrl: urls.grpcUrl };
  // The config service as its own process serves it: Connect + gRPC-Web on h1, gRPC on h2c.
  own = await buildProcess({
    name: "test-config",
    modules: [createConfigModule()],
    sources: testSources({ ...env, GOV_CONFIG_SERVICE_PORT: "0", GOV_CONFIG_SERVICE_GRPC_PORT: "0" }, LIMITS),
    logger,
  });
  const ownUrls = await own.listen({ managementPort: 0 });
  serviceTarget = { restUrl: "", connectUrl: ownUrls.url, grpcUrl: ownUrls.grpcUrl! };
});

afterAll(async () => {
  await own?.shutdown();
  await gw?.close();
});

/** An SSE watch on a raw socket that reads its first event (the watch is registered), then never reads again. */
async function nonReadingWatcher(): Promise<() => void> {
  const { hostname, port } = new URL(target!.restUrl);
  const socket = connect(Number(port), hostname);
  socket.on("error", () => undefined);
  socket.write(`GET /v1/namespaces/${encodeURIComponent("{stalled}")}/configs/big/watch HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
  let seen = "";
  while (!seen.includes('"current"')) seen += await new Promise<string>((resolve) => socket.once("data", (d: Buffer) => resolve(d.toString("latin1"))));
  socket.pause(); // the kernel's buffers fill, then the server's socket backs up
  return () => socket.destroy();
}

describeHostileInput("config service (all-in-one, embedded store)", {
  service: ConfigService,
  target: () => target!,
  pathValues: { namespace: "{hostile}", config_id: "app.yaml", version: "1", target_version: "1" },
  limits: { ...REST_BODY, message: READ_MAX_BYTES, messageSetting: "gov.limits.zip-upload", requestTimeoutMs: REQUEST_TIMEOUT_MS },
  // Buffering every update for every watcher would be 10 × 30 MiB; backpressure holds about one event each.
  nonReadingWatchers: {
    count: 10,
    updates: 30,
    open: nonReadingWatcher,
    write: async (i) => {
      const res = await fetch(`${target!.restUrl}/v1/namespaces/${encodeURIComponent("{stalled}")}/configs/big`, { method: "PUT", body: `${i}:`.padEnd(MiB, "abcdefghijklmnopqrstuvwxyz0123456789") });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    },
  },
});

describeHostileInput("config service (its own process's listeners)", {
  service: ConfigService,
  rest: false,
  target: () => serviceTarget!,
  limits: { ...REST_BODY, message: READ_MAX_BYTES, messageSetting: "gov.limits.zip-upload", requestTimeoutMs: REQUEST_TIMEOUT_MS },
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
