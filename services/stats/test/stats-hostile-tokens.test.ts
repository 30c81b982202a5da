import { NamespaceService } from "@gov/api/gen/gov/stats/v1/namespace_pb";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import { restGateway } from "@gov/gateway";
import { createSecurityGuard, createSecurityModule } from "@gov/security-service";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { describeHostileTokens, type HostileTarget } from "@gov/testkit/hostile-input";
import { afterAll, beforeAll, describe } from "vitest";
import { createStatsModule, MAX_STATS_MESSAGE_BYTES } from "../src/module.js";
import { freshSystem, namespaceTargets } from "./namespace-harness.js";
import { FAST } from "./stats-harness.js";

// The stats and namespace services behind the security guard: the token attacks (missing, malformed, forged, expired,
// alg:none, refresh-as-access: 401 on REST, Connect and gRPC) and malformed bodies and paths with a valid token (4xx
// in the contract's shape, never 5xx). Their other hostile input runs with security off in stats-hostile.test.ts.
const PASSWORD = "root-password-for-tests";
const REQUEST_TIMEOUT_MS = 1500;
const JSON_BODY = 128 * 1024;
const limits = { restBody: JSON_BODY, restBodySetting: "gov.limits.json-body", message: MAX_STATS_MESSAGE_BYTES + 1024, requestTimeoutMs: REQUEST_TIMEOUT_MS };

// On the embedded store and on Redis (where the signing key and the users live in Redis, as replicas share them).
for (const store of namespaceTargets().filter((t) => t.name !== "redis-cluster")) {
  describe.skipIf(store.skip)(`on the ${store.name} store`, () => {
    let proc: BuiltProcess | undefined;
    let target: HostileTarget | undefined;
    let tokens = { accessToken: "", refreshToken: "" };

    beforeAll(async () => {
      proc = await buildProcess({
        name: "test-stats-hostile-tokens",
        modules: [createStatsModule({ worker: FAST }), createSecurityModule({ announce: () => {} })],
        gateway: restGateway,
        guard: createSecurityGuard(),
        sources: {
          file: {},
          env: { ...store.env, GOV_NAMESPACE_SYSTEM: freshSystem(), GOV_SUPER_PASSWORD: PASSWORD, GOV_SHUTDOWN_GRACE: "1s", GOV_LIMITS_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`, GOV_LIMITS_JSON_BODY: String(JSON_BODY) },
        },
        logger: createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent"),
      });
      const urls = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
      target = { restUrl: urls.url, connectUrl: urls.url, grpcUrl: urls.grpcUrl! };
      const res = await fetch(`${urls.url}/v1/authenticate/root/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ password: PASSWORD }) });
      tokens = (await res.json()) as typeof tokens;
    });

    afterAll(async () => proc?.shutdown());

    const auth = { token: () => tokens.accessToken, refreshToken: () => tokens.refreshToken };

    describeHostileTokens(`stats service (security on, ${store.name})`, { service: StatsService, target: () => target!, pathValues: { namespace: "{hostile}" }, limits, auth });
    describeHostileTokens(`namespace service (security on, ${store.name})`, { service: NamespaceService, target: () => target!, pathValues: { namespace: "{hostile}" }, limits, auth });
  });
}
