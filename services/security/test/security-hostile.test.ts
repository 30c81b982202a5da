import { ConfigService } from "@gov/api";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { SecurityService } from "@gov/api/gen/gov/security/v1/security_pb";
import { describeHostileInput, describeHostileTokens, type HostileTarget } from "@gov/testkit/hostile-input";
import { afterAll, beforeAll, describe } from "vitest";
import { ROOT_PASSWORD, securityTargets, startSecure, type SecureProcess } from "./harness.js";

// Every endpoint of every service of the all-in-one process, with security on: the security service gets the whole
// hostile-input suite plus the token attacks; config and registry (whose other hostile input their own suites cover)
// get the token attacks and malformed bodies and paths with a valid token.
const REQUEST_TIMEOUT_MS = 1500;
const JSON_BODY = 128 * 1024;
// The security service's REST bodies are JSON: gov.limits.json-body, however large another module's request limit.
const limits = { restBody: JSON_BODY, restBodySetting: "gov.limits.json-body", message: 1024 * 1024 + 1024, requestTimeoutMs: REQUEST_TIMEOUT_MS };

let p: SecureProcess | undefined;
let target: HostileTarget | undefined;
let tokens = { accessToken: "", refreshToken: "" };

beforeAll(async () => {
  // gov.limits.zip-upload at 1 MiB: every RPC listener then takes 1 MiB + 1 KiB messages (the largest module limit).
  p = await startSecure({ name: "embedded" }, { GOV_LIMITS_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`, GOV_LIMITS_JSON_BODY: String(JSON_BODY), GOV_LIMITS_ZIP_UPLOAD: "1MiB" });
  target = { restUrl: p.url, connectUrl: p.url, grpcUrl: p.grpcUrl };
  tokens = await p.login("root", ROOT_PASSWORD);
});

afterAll(() => p?.close());

const auth = { token: () => tokens.accessToken, refreshToken: () => tokens.refreshToken, publicMethods: ["Login", "Refresh"] };

describeHostileInput("security service (all-in-one, embedded store, security on)", {
  service: SecurityService,
  target: () => target!,
  pathValues: { username: "someone", role_name: "somerole" },
  limits,
  auth,
});

describeHostileTokens("config service (security on)", { service: ConfigService, target: () => target!, pathValues: { namespace: "{hostile}", config_id: "a.yaml", target_version: "1", version: "1" }, limits, auth });

describeHostileTokens("registry service (security on)", {
  service: RegistryService,
  target: () => target!,
  pathValues: { namespace: "{hostile}", service_id: "order", instance_id: "order@http#h#1" },
  limits,
  auth,
});

// Again on Redis, with the signing key generated once and kept there (as replicas share it), not in memory: a forged,
// alg:none or wrong-secret token is refused against the stored key just the same, and the security service's Redis
// store takes the whole suite.
for (const redis of securityTargets().filter((t) => t.name === "redis")) {
  describe.skipIf(redis.skip)("with the key stored in Redis", () => {
    let onRedis: SecureProcess | undefined;
    let redisTokens = { accessToken: "", refreshToken: "" };
    beforeAll(async () => {
      onRedis = await startSecure(redis, { GOV_LIMITS_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`, GOV_LIMITS_JSON_BODY: String(JSON_BODY), GOV_LIMITS_ZIP_UPLOAD: "1MiB" });
      redisTokens = await onRedis.login("root", ROOT_PASSWORD);
    });
    afterAll(() => onRedis?.close());
    const onRedisTarget = () => ({ restUrl: onRedis!.url, connectUrl: onRedis!.url, grpcUrl: onRedis!.grpcUrl });
    const redisAuth = { token: () => redisTokens.accessToken, refreshToken: () => redisTokens.refreshToken, publicMethods: ["Login", "Refresh"] };
    // the security service's own store on Redis: users, roles and the audit log under the whole suite
    describeHostileInput("security service (all-in-one, Redis, security on)", {
      service: SecurityService,
      target: onRedisTarget,
      pathValues: { username: "someone", role_name: "somerole" },
      limits,
      auth: redisAuth,
    });
    describeHostileTokens("config service (security on, Redis)", {
      service: ConfigService,
      target: onRedisTarget,
      pathValues: { namespace: "{hostile}", config_id: "a.yaml", target_version: "1", version: "1" },
      limits,
      auth: redisAuth,
    });
    describeHostileTokens("registry service (security on, Redis)", {
      service: RegistryService,
      target: onRedisTarget,
      pathValues: { namespace: "{hostile}", service_id: "order", instance_id: "order@http#h#1" },
      limits,
      auth: redisAuth,
    });
  });
}
