import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { restGateway } from "@gov/gateway";
import { connectRedis } from "@gov/redis";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import type { SettingsSources } from "@gov/settings";
import { redisTargets } from "@gov/testkit";
import { expect } from "vitest";
import { createRegistryModule } from "../src/module.js";
import { createMemoryRegistryStore } from "../src/store/memory-registry-store.js";
import { createRedisRegistryStore } from "../src/store/redis-registry-store.js";
import type { RegistryStore } from "../src/store/registry-store.js";

/** The three stores every end-to-end suite runs on; Redis ones carry a skip reason when Redis is unavailable. */
export function storeTargets(): { name: string; skip: string; open: () => Promise<RegistryStore> }[] {
  return [
    { name: "embedded", skip: "", open: async () => createMemoryRegistryStore() },
    ...redisTargets().map((t) => ({ name: t.name, skip: t.skip, open: async () => createRedisRegistryStore(await connectRedis(t.url), { kind: t.name }) })),
  ];
}

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

/** Settings as the environment would give them, for a test process: no gov.yaml, nothing from the real environment. */
export const testSources = (env: Record<string, string> = {}): SettingsSources => ({
  file: {},
  env: { GOV_LIMITS_JSON_BODY: String(128 * 1024), GOV_SHUTDOWN_GRACE: "3s", ...env },
});

export interface RegistryGateway {
  proc: BuiltProcess;
  listen(): Promise<{ url: string; grpcUrl: string }>;
  close(): Promise<void>;
}

/** The all-in-one process (`buildProcess` with the REST gateway) running the registry module on `store`, which it owns. */
export async function createRegistryGateway(store?: RegistryStore, env: Record<string, string> = {}): Promise<RegistryGateway> {
  const proc = await buildProcess({ name: "test-registry", modules: [createRegistryModule({ store })], gateway: restGateway, sources: testSources(env), logger });
  return {
    proc,
    async listen() {
      const urls = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
      return { url: urls.url, grpcUrl: urls.grpcUrl! };
    },
    close: () => proc.shutdown(),
  };
}

/** Connect clients of every protocol against a listening process. */
export function registryClients({ url: baseUrl, grpcUrl }: { url: string; grpcUrl: string }): { name: string; client: Client<typeof RegistryService> }[] {
  return [
    { name: "connect+json", client: createClient(RegistryService, createConnectTransport({ baseUrl, httpVersion: "1.1" })) },
    { name: "grpc-web", client: createClient(RegistryService, createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })) },
    { name: "grpc (h2c)", client: createClient(RegistryService, createGrpcTransport({ baseUrl: grpcUrl })) },
  ];
}

let seq = 0;
/** A fresh, valid namespace per test. */
export const ns = (label = "") => `${label}{rg${process.pid}x${Date.now().toString(36)}x${seq++}}`;
/** Percent-encodes a path segment the way clients should ('#' → %23, braces, '/'). */
export const seg = (s: string) => encodeURIComponent(s);

/** Opens a REST watch (Server-Sent Events): see @gov/testkit. */
export { readSse } from "@gov/testkit";

/** A watch message's `hash` (the SSE `id:`): the hex digest of the state the client holds (see state-digest.ts). */
export const DIGEST = /^[0-9a-f]{64}$/;
/** A watch event as the watch yields it: with a digest (the one `e` names, else any). */
export const hashed = <E extends object>(e: E) => ({ hash: expect.stringMatching(DIGEST), ...e });
