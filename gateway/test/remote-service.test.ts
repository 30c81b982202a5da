import { ConfigService } from "@gov/api";
import { configRoutes, createConfigService, createMemoryConfigStore } from "@gov/config-service";
import { createLogger, errorInterceptor, remoteTransport, serveConnect, type ConnectServer } from "@gov/service-kit";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildGateway } from "../src/index.js";
import { ns, seg, TEST_LIMITS } from "./harness.js";

/** The split deployment: the config service in its own server, the gateway reaching it over HTTP (GOV_CONFIG_SERVICE_URL). */
describe("gateway → remote config service over HTTP", () => {
  const logger = createLogger("test", "silent");
  let service: ConnectServer;
  let gateway: FastifyInstance;
  beforeAll(async () => {
    service = await serveConnect({
      routes: configRoutes(createConfigService({ store: createMemoryConfigStore({ maxVersions: 10 }), namespaceRule: { requireHashTag: true }, limits: TEST_LIMITS })),
      interceptors: [errorInterceptor(logger)],
      port: 0,
      grpcPort: 0,
      logger,
    });
    gateway = await buildGateway({
      services: [{ service: ConfigService, transport: remoteTransport(service.url) }],
      logger,
      limits: { maxJsonBody: 1 << 20, maxZipBytes: TEST_LIMITS.maxZipBytes },
    });
  });
  afterAll(async () => {
    await gateway?.close();
    await service?.close();
  });

  it("REST calls, errors and the streamed ZIP export all cross the wire intact", async () => {
    const n = ns("remote");
    const url = `/v1/namespaces/${seg(n)}/configs/a%2Fb.yaml`;
    expect((await gateway.inject({ method: "PUT", url, payload: "k: v", headers: { "content-type": "text/plain" } })).json()).toBe(true);
    expect((await gateway.inject({ method: "GET", url })).json()).toMatchObject({ configId: "a/b.yaml", data: "k: v", version: 1 });
    const missing = await gateway.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/none` });
    expect([missing.statusCode, missing.json().code]).toEqual([404, "not_found"]);
    const bad = await gateway.inject({ method: "GET", url: "/v1/namespaces/dev/configs" });
    expect([bad.statusCode, bad.json().code]).toEqual([400, "invalid_argument"]);
    const zip = await gateway.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/export` });
    expect([zip.statusCode, zip.headers["content-type"], zip.rawPayload.subarray(0, 2).toString()]).toEqual([200, "application/zip", "PK"]);
  });
});
