import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ConfigService } from "@gov/api";
import { NamespaceService } from "@gov/api/gen/gov/stats/v1/namespace_pb";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { createConfigModule } from "@gov/config-service";
import { restGateway } from "@gov/gateway";
import { createRegistryModule } from "@gov/registry-service";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { redisTargets } from "@gov/testkit";
import { createStatsModule } from "../src/module.js";
import type { WorkerTiming } from "../src/worker/run-worker.js";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

let seq = 0;
const unique = () => `${process.pid}x${Date.now().toString(36)}x${seq++}`;
/** A fresh, valid namespace per test: suites sharing one Redis never see each other's data. */
export const ns = (label = "") => `${label}{ns${unique()}}`;
/** A system namespace of its own per process under test, so its index and current namespace are the test's alone. */
export const freshSystem = () => `gov-{sys${unique()}}`;
export const seg = (s: string) => encodeURIComponent(s);

/** The all-in-one process on each store: embedded, Redis, Redis Cluster (REDIS_URL, as `npm start` reads it). */
export function namespaceTargets(): { name: string; skip: string; env: Record<string, string> }[] {
  return [{ name: "embedded", skip: "", env: {} }, ...redisTargets().map((t) => ({ name: t.name, skip: t.skip, env: { REDIS_URL: t.url } }))];
}

export interface NamespaceProcess {
  proc: BuiltProcess;
  system: string;
  listen(): Promise<{ url: string; grpcUrl: string }>;
  close(): Promise<void>;
}

/**
 * The modules of `npm start` (config, registry, stats — without its worker unless `worker` times it) behind the REST gateway, as `buildProcess`
 * builds them: one store and one namespace index per process, shared by the modules through `ModuleContext.shared`.
 */
export async function createNamespaceProcess(env: Record<string, string> = {}, system = freshSystem(), worker: WorkerTiming | false = false): Promise<NamespaceProcess> {
  const proc = await buildProcess({
    name: "test-namespaces",
    modules: [createConfigModule(), createRegistryModule(), createStatsModule({ worker })],
    gateway: restGateway,
    sources: { file: {}, env: { GOV_SHUTDOWN_GRACE: "3s", GOV_NAMESPACE_SYSTEM: system, ...env } },
    logger,
  });
  return {
    proc,
    system,
    async listen() {
      const urls = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
      return { url: urls.url, grpcUrl: urls.grpcUrl! };
    },
    close: () => proc.shutdown(),
  };
}

/** Connect (HTTP/1.1) and gRPC (h2c) clients of the three services a namespace test needs. */
export function clientsOf(urls: { url: string; grpcUrl: string }, protocol: "connect" | "grpc" = "connect") {
  const transport = protocol === "connect" ? createConnectTransport({ baseUrl: urls.url, httpVersion: "1.1" }) : createGrpcTransport({ baseUrl: urls.grpcUrl });
  return {
    namespaces: createClient(NamespaceService, transport) as Client<typeof NamespaceService>,
    configs: createClient(ConfigService, transport) as Client<typeof ConfigService>,
    registry: createClient(RegistryService, transport) as Client<typeof RegistryService>,
  };
}
