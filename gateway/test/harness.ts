import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ConfigService } from "@gov/api";
import { configRoutes, createConfigService, createMemoryConfigStore, createRedisConfigStore, type ConfigStore } from "@gov/config-service";
import { connectRedis } from "@gov/redis";
import { createH2cServer, createLogger, errorInterceptor } from "@gov/service-kit";
import { redisTargets } from "@gov/testkit";
import type { FastifyInstance } from "fastify";
import { buildGateway, inProcessTransport } from "../src/index.js";

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
  /** Starts the HTTP/1.1 listener (REST, Connect, gRPC-Web) and the h2c one (gRPC) on free ports. */
  listen(): Promise<{ url: string; grpcUrl: string }>;
  close(): Promise<void>;
}

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

/** The all-in-one wiring of `npm start` (gateway + in-process config service) on a given store, which it owns. */
export async function createTestGateway(store: ConfigStore, limits = TEST_LIMITS, requireHashTag = true): Promise<TestGateway> {
  const impl = createConfigService({ store, namespaceRule: { requireHashTag }, limits });
  const routes = configRoutes(impl);
  const interceptors = [errorInterceptor(logger)];
  const app = await buildGateway({
    services: [{ service: ConfigService, transport: inProcessTransport([{ service: ConfigService, impl }], interceptors) }],
    logger,
    limits: { maxJsonBody: 128 * 1024, maxZipBytes: limits.maxZipBytes },
    connect: { routes, interceptors },
  });
  let grpc: FastifyInstance | undefined;
  const portOf = (a: FastifyInstance) => (a.server.address() as { port: number }).port;
  const gw: TestGateway = {
    app,
    async listen() {
      grpc = await createH2cServer({ routes, interceptors, logger });
      await app.listen({ port: 0, host: "127.0.0.1" });
      await grpc.listen({ port: 0, host: "127.0.0.1" });
      return { url: `http://127.0.0.1:${portOf(app)}`, grpcUrl: `http://127.0.0.1:${portOf(grpc)}` };
    },
    async close() {
      await grpc?.close();
      await app.close();
      await store.close();
    },
  };
  return gw;
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
