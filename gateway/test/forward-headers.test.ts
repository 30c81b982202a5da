import type { Interceptor } from "@connectrpc/connect";
import { ConfigService } from "@gov/api";
import { createConfigService, createMemoryConfigStore } from "@gov/config-service";
import { createLogger, errorInterceptor, inProcessTransport } from "@gov/service-kit";
import { loadSettings } from "@gov/settings";
import type { FastifyInstance } from "fastify";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { buildGateway, gatewaySettings } from "../src/index.js";

// What a service sees of a REST request's headers, recorded by a server interceptor (where an auth or audit
// interceptor will read them), behind a real gateway listening on 127.0.0.1.

const logger = createLogger("test", "silent");
const seen: Record<string, string>[] = [];
const recordHeaders: Interceptor = (next) => async (req) => {
  seen.push(Object.fromEntries(req.header));
  return next(req);
};

async function gateway(trustedProxies?: string[]): Promise<{ app: FastifyInstance; url: string }> {
  const impl = createConfigService({
    store: createMemoryConfigStore({ maxVersions: 10 }),
    namespaceRule: { requireHashTag: true },
    limits: { maxContentBytes: 1024, maxZipBytes: 64 * 1024, maxZipEntries: 10, maxZipUncompressedBytes: 64 * 1024 },
  });
  const interceptors = [errorInterceptor(logger), recordHeaders];
  const app = await buildGateway({
    services: [{ service: ConfigService, transport: inProcessTransport([{ service: ConfigService, impl }], interceptors) }],
    logger,
    limits: { maxJsonBody: 64 * 1024, maxZipBytes: 64 * 1024 },
    trustedProxies,
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  return { app, url: `http://127.0.0.1:${(app.server.address() as { port: number }).port}` };
}

/** The headers the service saw for one REST call. */
async function headersSeenFor(url: string, headers: Record<string, string>): Promise<Record<string, string>> {
  seen.length = 0;
  const res = await fetch(`${url}/v1/namespaces/${encodeURIComponent("{dev}")}/configs`, { headers });
  expect(res.status).toBe(200);
  expect(seen).toHaveLength(1);
  return seen[0];
}

const spoofed = { "x-forwarded-for": "198.51.100.1, 203.0.113.7" };

describe("headers that cross from REST to the services", () => {
  let direct: { app: FastifyInstance; url: string };
  let behindProxy: { app: FastifyInstance; url: string };
  beforeAll(async () => {
    direct = await gateway(); // default: no trusted proxies
    behindProxy = await gateway(["127.0.0.1"]);
  });
  afterAll(async () => {
    await direct?.app.close();
    await behindProxy?.app.close();
  });
  afterEach(() => {
    seen.length = 0;
  });

  it("identity, correlation and trace headers cross; nothing else does", async () => {
    const got = await headersSeenFor(direct.url, {
      authorization: "Bearer t0ken",
      "x-gov-consumer": "billing",
      "x-request-id": "req-1",
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      tracestate: "vendor=1",
      cookie: "session=secret",
      "x-custom": "no",
    });
    expect(got).toEqual({
      authorization: "Bearer t0ken",
      "x-gov-consumer": "billing",
      "x-request-id": "req-1",
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      tracestate: "vendor=1",
      "x-forwarded-for": "127.0.0.1",
    });
  });

  it("a spoofed X-Forwarded-For from a peer that is not a trusted proxy does not reach the service: it sees the peer", async () => {
    expect((await headersSeenFor(direct.url, spoofed))["x-forwarded-for"]).toBe("127.0.0.1");
  });

  it("from a trusted proxy, the chain reaches the service as far back as it can be vouched for, then the proxy", async () => {
    // 127.0.0.1 is trusted, so 203.0.113.7 (who connected to it) is the client; 198.51.100.1 could be made up.
    expect((await headersSeenFor(behindProxy.url, spoofed))["x-forwarded-for"]).toBe("203.0.113.7, 127.0.0.1");
    expect((await headersSeenFor(behindProxy.url, {}))["x-forwarded-for"]).toBe("127.0.0.1");
  });

  it("a chain of trusted proxies is followed to the first address that is not one", async () => {
    const chain = await gateway(["127.0.0.1", "203.0.113.0/24"]);
    try {
      expect((await headersSeenFor(chain.url, spoofed))["x-forwarded-for"]).toBe("198.51.100.1, 203.0.113.7, 127.0.0.1");
    } finally {
      await chain.app.close();
    }
  });
});

describe("gov.security.trusted-proxies", () => {
  const load = (file: Record<string, string>, env: Record<string, string> = {}) => loadSettings(gatewaySettings, { file, env }).trustedProxies;

  it("defaults to none and takes addresses, CIDRs and proxy-addr's names, from the environment or a YAML list", () => {
    expect(load({})).toEqual([]);
    expect(load({}, { GOV_SECURITY_TRUSTED_PROXIES: "10.0.0.1, 10.1.0.0/16,::1" })).toEqual(["10.0.0.1", "10.1.0.0/16", "::1"]);
    expect(load({ "gov.security.trusted-proxies": "loopback,192.168.0.0/16" })).toEqual(["loopback", "192.168.0.0/16"]);
  });

  it("a bad entry stops startup with a message that names the setting and the entry", () => {
    expect(() => load({}, { GOV_SECURITY_TRUSTED_PROXIES: "10.0.0.1,10.0.0.300" })).toThrow(
      /gov\.security\.trusted-proxies.*"10\.0\.0\.300" is not an IP address, a CIDR/,
    );
  });
});

describe("x-forwarded-for on the Connect, gRPC-Web and gRPC listeners", () => {
  it("a direct RPC client's own x-forwarded-for is not believed; from a trusted proxy it is", async () => {
    const { createClient } = await import("@connectrpc/connect");
    const { createConnectTransport, createGrpcTransport, createGrpcWebTransport } = await import("@connectrpc/connect-node");
    const { createH2cServer, serveConnect } = await import("@gov/service-kit");
    const impl = createConfigService({
      store: createMemoryConfigStore({ maxVersions: 10 }),
      namespaceRule: { requireHashTag: true },
      limits: { maxContentBytes: 1024, maxZipBytes: 64 * 1024, maxZipEntries: 10, maxZipUncompressedBytes: 64 * 1024 },
    });
    const routes = (r: import("@connectrpc/connect").ConnectRouter) => void r.service(ConfigService, impl);
    const interceptors = [errorInterceptor(logger), recordHeaders];
    const untrusted = await serveConnect({ routes, interceptors, logger, port: 0, grpcPort: 0 });
    const trusted = await createH2cServer({ routes, interceptors, logger, trustedProxies: ["127.0.0.1"] });
    await trusted.listen({ port: 0, host: "127.0.0.1" });
    const trustedUrl = `http://127.0.0.1:${(trusted.server.address() as { port: number }).port}`;
    try {
      const seenBy = async (transport: import("@connectrpc/connect").Transport) => {
        seen.length = 0;
        await createClient(ConfigService, transport).listConfigs({ namespace: "{dev}" }, { headers: spoofed });
        return seen[0]["x-forwarded-for"];
      };
      expect(await seenBy(createConnectTransport({ baseUrl: untrusted.url, httpVersion: "1.1" }))).toBe("127.0.0.1");
      expect(await seenBy(createGrpcWebTransport({ baseUrl: untrusted.url, httpVersion: "1.1" }))).toBe("127.0.0.1");
      expect(await seenBy(createGrpcTransport({ baseUrl: untrusted.grpcUrl }))).toBe("127.0.0.1");
      // behind a trusted proxy (here: the peer itself), the chain is kept as far as it is vouched for
      expect(await seenBy(createGrpcTransport({ baseUrl: trustedUrl }))).toBe("203.0.113.7, 127.0.0.1");
    } finally {
      await untrusted.close();
      await trusted.close();
    }
  });
});
