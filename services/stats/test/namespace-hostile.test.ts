import { NamespaceService } from "@gov/api/gen/gov/stats/v1/namespace_pb";
import { restGateway } from "@gov/gateway";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { describeHostileInput, type HostileTarget } from "@gov/testkit/hostile-input";
import { afterAll, beforeAll } from "vitest";
import { createStatsModule, MAX_STATS_MESSAGE_BYTES } from "../src/module.js";
import { freshSystem } from "./namespace-harness.js";

// A short gov.limits.request-timeout, so that slow-body attacks are cut within the test's time.
const REQUEST_TIMEOUT_MS = 1500;
const JSON_BODY = 128 * 1024;
const env = { GOV_LIMITS_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`, GOV_LIMITS_JSON_BODY: String(JSON_BODY), GOV_SHUTDOWN_GRACE: "3s" };
const limits = { restBody: Math.max(JSON_BODY, MAX_STATS_MESSAGE_BYTES), message: MAX_STATS_MESSAGE_BYTES + 1024, requestTimeoutMs: REQUEST_TIMEOUT_MS };
const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

let gateway: BuiltProcess | undefined;
let own: BuiltProcess | undefined;
let target: HostileTarget | undefined;
let serviceTarget: HostileTarget | undefined;

beforeAll(async () => {
  // The stats module alone (its namespace service opens the shared stores itself), behind the REST gateway…
  gateway = await buildProcess({
    name: "test-namespaces-hostile",
    modules: [createStatsModule({ worker: false })],
    gateway: restGateway,
    sources: { file: {}, env: { ...env, GOV_NAMESPACE_SYSTEM: freshSystem() } },
    logger,
  });
  const urls = await gateway.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
  target = { restUrl: urls.url, connectUrl: urls.url, grpcUrl: urls.grpcUrl! };
  // …and as the stats service's own process (Connect + gRPC-Web on h1, gRPC on h2c).
  own = await buildProcess({
    name: "test-namespaces-own",
    modules: [createStatsModule({ worker: false })],
    sources: { file: {}, env: { ...env, GOV_NAMESPACE_SYSTEM: freshSystem(), GOV_STATS_SERVICE_PORT: "0", GOV_STATS_SERVICE_GRPC_PORT: "0" } },
    logger,
  });
  const ownUrls = await own.listen({ managementPort: 0 });
  serviceTarget = { restUrl: "", connectUrl: ownUrls.url, grpcUrl: ownUrls.grpcUrl! };
});

afterAll(async () => {
  await own?.shutdown();
  await gateway?.shutdown();
});

describeHostileInput("namespace service (all-in-one, embedded store)", {
  service: NamespaceService,
  target: () => target!,
  pathValues: { namespace: "{hostile}" },
  limits,
});

describeHostileInput("namespace service (the stats service's own listeners)", {
  service: NamespaceService,
  rest: false,
  target: () => serviceTarget!,
  limits,
});
