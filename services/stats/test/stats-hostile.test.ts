import { NamespaceService } from "@gov/api/gen/gov/stats/v1/namespace_pb";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import { restGateway } from "@gov/gateway";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { describeHostileInput, type HostileTarget } from "@gov/testkit/hostile-input";
import { afterAll, beforeAll } from "vitest";
import { createStatsModule, MAX_STATS_MESSAGE_BYTES } from "../src/module.js";
import { FAST, testSources } from "./stats-harness.js";

// A short gov.limits.request-timeout, so that slow-body attacks are cut within the test's time.
const REQUEST_TIMEOUT_MS = 1500;
const JSON_BODY = 128 * 1024;
const env = { GOV_LIMITS_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`, GOV_LIMITS_JSON_BODY: String(JSON_BODY) };
const limits = { restBody: JSON_BODY, restBodySetting: "gov.limits.json-body", message: MAX_STATS_MESSAGE_BYTES + 1024, requestTimeoutMs: REQUEST_TIMEOUT_MS };
const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

let gateway: BuiltProcess | undefined;
let own: BuiltProcess | undefined;
let target: HostileTarget | undefined;
let serviceTarget: HostileTarget | undefined;

beforeAll(async () => {
  // The stats module behind the REST gateway (embedded store, its worker running on a short period)…
  gateway = await buildProcess({ name: "test-stats-gw", modules: [createStatsModule({ worker: FAST })], gateway: restGateway, sources: testSources(env), logger });
  const urls = await gateway.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
  target = { restUrl: urls.url, connectUrl: urls.url, grpcUrl: urls.grpcUrl! };
  // …and as its own process: Connect + gRPC-Web on h1, gRPC on h2c.
  own = await buildProcess({ name: "test-stats-own", modules: [createStatsModule({ worker: FAST })], sources: testSources({ ...env, GOV_STATS_SERVICE_PORT: "0", GOV_STATS_SERVICE_GRPC_PORT: "0" }), logger });
  const ownUrls = await own.listen({ managementPort: 0 });
  serviceTarget = { restUrl: "", connectUrl: ownUrls.url, grpcUrl: ownUrls.grpcUrl! };
});

afterAll(async () => {
  await own?.shutdown();
  await gateway?.shutdown();
});

describeHostileInput("stats service (all-in-one gateway, embedded store)", {
  service: StatsService,
  target: () => target!,
  pathValues: { namespace: "{hostile}" },
  limits,
});

describeHostileInput("stats service (its own process's listeners)", {
  service: StatsService,
  rest: false,
  target: () => serviceTarget!,
  limits,
});

// The namespace service is served by the same module, on the same listeners.
describeHostileInput("namespace service (all-in-one gateway, embedded store)", {
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
