import { createConfigModule, createMemoryConfigStore } from "@gov/config-service";
import { buildProcess, createLogger, parseCorsOrigins, type BuiltProcess } from "@gov/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestGateway, testSources, type TestGateway } from "./harness.js";

const APP = "https://app.example.com";
const CONFIG = "/v1/namespaces/%7Bcors%7D/configs/app.yaml";
const GET_CONFIG = "/gov.config.v1.ConfigService/GetConfig";
const SET_CONFIG = "/gov.config.v1.ConfigService/SetConfig";

const preflight = (url: string, method: string, headers: string, origin = APP) => ({
  method: "OPTIONS" as const,
  url,
  headers: { origin, "access-control-request-method": method, "access-control-request-headers": headers },
});
const listOf = (header: string | string[] | number | undefined) =>
  String(header ?? "")
    .toLowerCase()
    .split(",")
    .map((s) => s.trim());

describe("CORS (gov.cors.origins)", () => {
  describe("off by default", () => {
    let gw: TestGateway;
    beforeAll(async () => {
      gw = await createTestGateway(createMemoryConfigStore({ maxVersions: 10 }));
    });
    afterAll(async () => gw?.close());

    it("answers no preflight and adds no CORS headers", async () => {
      const pre = await gw.app.inject(preflight(CONFIG, "PUT", "content-type"));
      expect(pre.headers["access-control-allow-origin"]).toBeUndefined();
      expect(pre.statusCode).toBeGreaterThanOrEqual(400);
      expect(pre.json()).toMatchObject({ code: expect.any(String), message: expect.any(String) });
      const put = await gw.app.inject({ method: "PUT", url: CONFIG, headers: { origin: APP }, payload: "a: 1\n" });
      expect(put.statusCode).toBe(200);
      expect(put.headers["access-control-allow-origin"]).toBeUndefined();
    });
  });

  describe("with a list of origins, on the gateway (REST, Connect, gRPC-Web)", () => {
    let gw: TestGateway;
    beforeAll(async () => {
      gw = await createTestGateway(createMemoryConfigStore({ maxVersions: 10 }), undefined, true, { GOV_CORS_ORIGINS: `${APP}, http://localhost:5173` });
    });
    afterAll(async () => gw?.close());

    it("answers a REST preflight for a listed origin, allowing the method and Authorization", async () => {
      const r = await gw.app.inject(preflight(CONFIG, "PUT", "content-type, authorization, if-none-match"));
      expect(r.statusCode).toBe(204);
      expect(r.headers["access-control-allow-origin"]).toBe(APP);
      expect(listOf(r.headers["vary"])).toContain("origin");
      expect(listOf(r.headers["access-control-allow-methods"])).toEqual(expect.arrayContaining(["get", "put", "post", "delete"]));
      expect(listOf(r.headers["access-control-allow-headers"])).toEqual(expect.arrayContaining(["content-type", "authorization", "if-none-match", "x-gov-consumer", "x-gov-consumer-namespace"]));
      expect(new Set(listOf(r.headers["access-control-allow-headers"])).size).toBe(listOf(r.headers["access-control-allow-headers"]).length); // each once
      expect(Number(r.headers["access-control-max-age"])).toBeGreaterThan(0);
    });

    it("answers Connect and gRPC-Web preflights with their protocol headers", async () => {
      const connect = await gw.app.inject(preflight(GET_CONFIG, "POST", "content-type, connect-protocol-version, connect-timeout-ms"));
      expect(connect.statusCode).toBe(204);
      expect(connect.headers["access-control-allow-origin"]).toBe(APP);
      expect(listOf(connect.headers["access-control-allow-headers"])).toEqual(expect.arrayContaining(["connect-protocol-version", "connect-timeout-ms", "authorization"]));
      const grpcWeb = await gw.app.inject(preflight(GET_CONFIG, "POST", "content-type, x-grpc-web, x-user-agent, grpc-timeout", "http://localhost:5173"));
      expect(grpcWeb.statusCode).toBe(204);
      expect(grpcWeb.headers["access-control-allow-origin"]).toBe("http://localhost:5173");
      expect(listOf(grpcWeb.headers["access-control-allow-headers"])).toEqual(expect.arrayContaining(["x-grpc-web", "x-user-agent", "grpc-timeout"]));
    });

    it("adds the CORS headers to actual REST requests and exposes ETag", async () => {
      const put = await gw.app.inject({ method: "PUT", url: CONFIG, headers: { origin: APP }, payload: "a: 1\n" });
      expect(put.statusCode).toBe(200);
      expect(put.headers["access-control-allow-origin"]).toBe(APP);
      const get = await gw.app.inject({ method: "GET", url: CONFIG, headers: { origin: APP } });
      expect(get.json().data).toBe("a: 1\n");
      expect(get.headers["access-control-allow-origin"]).toBe(APP);
      expect(get.headers.etag).toBeDefined();
      expect(listOf(get.headers["access-control-expose-headers"])).toEqual(expect.arrayContaining(["etag", "grpc-status", "grpc-message", "grpc-status-details-bin", "content-disposition"]));
    });

    it("adds the CORS headers to actual Connect calls, errors included", async () => {
      const headers = { origin: APP, "content-type": "application/json", "connect-protocol-version": "1" };
      const set = await gw.app.inject({ method: "POST", url: SET_CONFIG, headers, payload: JSON.stringify({ namespace: "{cors}", configId: "c.yaml", data: "x" }) });
      expect(set.statusCode).toBe(200);
      expect(set.json().changed).toBe(true);
      expect(set.headers["access-control-allow-origin"]).toBe(APP);
      const missing = await gw.app.inject({ method: "POST", url: GET_CONFIG, headers, payload: JSON.stringify({ namespace: "{cors}", configId: "nope" }) });
      expect(missing.statusCode).toBe(404);
      expect(missing.json().code).toBe("not_found");
      expect(missing.headers["access-control-allow-origin"]).toBe(APP); // the browser may read the error
    });

    it("gives an origin that is not listed no CORS headers (the browser then blocks the answer)", async () => {
      const pre = await gw.app.inject(preflight(CONFIG, "PUT", "content-type", "https://evil.example"));
      expect(pre.headers["access-control-allow-origin"]).toBeUndefined();
      const get = await gw.app.inject({ method: "GET", url: CONFIG, headers: { origin: "https://evil.example" } });
      expect(get.headers["access-control-allow-origin"]).toBeUndefined();
    });
  });

  describe("with *, on a service's own listener (Connect, gRPC-Web; no gateway)", () => {
    let proc: BuiltProcess;
    beforeAll(async () => {
      proc = await buildProcess({
        name: "cors-test",
        modules: [createConfigModule({ store: createMemoryConfigStore({ maxVersions: 10 }) })],
        sources: testSources({ GOV_CORS_ORIGINS: "*" }),
        logger: createLogger("test", "silent"),
      });
    });
    afterAll(async () => proc?.shutdown());

    it("answers the preflight and the call for any origin", async () => {
      const pre = await proc.http.inject(preflight(GET_CONFIG, "POST", "content-type, connect-protocol-version"));
      expect(pre.statusCode).toBe(204);
      expect(pre.headers["access-control-allow-origin"]).toBe("*");
      const call = await proc.http.inject({
        method: "POST",
        url: SET_CONFIG,
        headers: { origin: "https://anywhere.example", "content-type": "application/json" },
        payload: JSON.stringify({ namespace: "{cors}", configId: "s.yaml", data: "x" }),
      });
      expect(call.statusCode).toBe(200);
      expect(call.headers["access-control-allow-origin"]).toBe("*");
    });
  });

  it("the setting takes origins exactly and says how to fix a wrong one", () => {
    expect(parseCorsOrigins(" https://a.example, http://localhost:5173 ")).toEqual(["https://a.example", "http://localhost:5173"]);
    expect(parseCorsOrigins("https://a.example,*")).toEqual(["*"]);
    expect(parseCorsOrigins("")).toEqual([]);
    expect(() => parseCorsOrigins("https://a.example/")).toThrow(/not an origin: write scheme:\/\/host\[:port\]/);
    expect(() => parseCorsOrigins("a.example")).toThrow(/not an origin/);
  });
});
