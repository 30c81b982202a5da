import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ConfigService } from "@gov/api";
import { createConfigModule, createMemoryConfigStore, createRedisConfigStore, type ConfigStore } from "@gov/config-service";
import { connectRedis } from "@gov/redis";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import type { SettingsSources } from "@gov/settings";
import { redisTargets } from "@gov/testkit";
import type { FastifyInstance } from "fastify";
import { restGateway } from "../src/index.js";

export const TEST_LIMITS = {
  maxContentBytes: 64 * 1024,
  maxZipBytes: 256 * 1024,
  maxZipEntries: 20,
  maxZipUncompressedBytes: 512 * 1024,
};

/** The three stores every end-to-end suite runs on; Redis ones carry a skip reason when Redis is unavailable. */
export function storeTargets(): { name: string; skip: string; open: () => Promise<ConfigStore> }[] {
  return [
    { name: "embedded", skip: "", open: async () => createMemoryConfigStore({ maxVersions: 100 }) },
    ...redisTargets().map((t) => ({
      name: t.name,
      skip: t.skip,
      open: async () => createRedisConfigStore(await connectRedis(t.url), { maxVersions: 100, kind: t.name }),
    })),
  ];
}

export interface TestGateway {
  app: FastifyInstance;
  /** The whole process as `npm start` builds it (readiness, metrics, management app, shutdown). */
  proc: BuiltProcess;
  /** Starts the HTTP/1.1 listener (REST, Connect, gRPC-Web), the h2c one (gRPC) and management on free ports. */
  listen(): Promise<{ url: string; grpcUrl: string; managementUrl: string }>;
  close(): Promise<void>;
}

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

/** Settings as the environment would give them, for a test process: no gov.yaml, nothing from the real environment. */
export function testSources(env: Record<string, string> = {}, limits = TEST_LIMITS): SettingsSources {
  return {
    file: {},
    env: {
      GOV_LIMITS_CONFIG_CONTENT: String(limits.maxContentBytes),
      GOV_LIMITS_ZIP_UPLOAD: String(limits.maxZipBytes),
      GOV_LIMITS_ZIP_ENTRIES: String(limits.maxZipEntries),
      GOV_LIMITS_ZIP_UNCOMPRESSED: String(limits.maxZipUncompressedBytes),
      GOV_LIMITS_JSON_BODY: String(128 * 1024),
      GOV_SHUTDOWN_GRACE: "3s",
      ...env,
    },
  };
}

/**
 * The all-in-one process of `npm start` (the same build function, `buildProcess`, with the gateway and the config
 * module), on a given store, which it owns; or, without a store, on what `env` selects (REDIS_URL). Other settings go
 * in `env` as the environment would give them, e.g. `{ GOV_LIMITS_REQUEST_TIMEOUT: "1500ms" }` for a short request
 * timeout on every listener.
 */
export async function createTestGateway(store?: ConfigStore, limits = TEST_LIMITS, requireHashTag = true, env: Record<string, string> = {}): Promise<TestGateway> {
  const proc = await buildProcess({
    name: "test",
    modules: [createConfigModule({ store })],
    gateway: restGateway,
    sources: testSources({ GOV_NAMESPACE_REQUIRE_HASH_TAG: String(requireHashTag), ...env }, limits),
    logger,
  });
  return {
    app: proc.http,
    proc,
    async listen() {
      const urls = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
      return { url: urls.url, grpcUrl: urls.grpcUrl!, managementUrl: urls.managementUrl };
    },
    close: () => proc.shutdown(),
  };
}

/** Connect clients of every protocol against a listening gateway. */
export function configClients({ url: baseUrl, grpcUrl }: { url: string; grpcUrl: string }): { name: string; client: Client<typeof ConfigService> }[] {
  return [
    { name: "connect+json", client: createClient(ConfigService, createConnectTransport({ baseUrl, httpVersion: "1.1" })) },
    { name: "grpc-web", client: createClient(ConfigService, createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })) },
    { name: "grpc (h2c)", client: createClient(ConfigService, createGrpcTransport({ baseUrl: grpcUrl })) },
  ];
}

let seq = 0;
/** A fresh, valid namespace per test so suites sharing one Redis never see each other's data. */
export const ns = (label = "") => `${label}{gw${process.pid}x${Date.now().toString(36)}x${seq++}}`;
/** Percent-encodes a path segment the way clients should (braces, '/', '#', ':' …). */
export const seg = (s: string) => encodeURIComponent(s);
