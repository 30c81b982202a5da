// The all-in-one process: the gateway's port serves REST, Connect and gRPC-Web, its h2c port gRPC. Unknown RPCs
// are answered in the caller's protocol on both, and the gRPC port offers reflection and health.
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ConfigService, GetConfigRequestSchema } from "@gov/api";
import { createMemoryConfigStore } from "@gov/config-service";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestGateway, type TestGateway } from "./harness.js";

describe("gRPC hygiene of the all-in-one process", () => {
  let gw: TestGateway;
  let urls: { url: string; grpcUrl: string };
  beforeAll(async () => {
    gw = await createTestGateway(createMemoryConfigStore({ maxVersions: 100 }));
    urls = await gw.listen();
  });
  afterAll(() => gw?.close());

  it("answers an unknown RPC with unimplemented on Connect, gRPC-Web (gateway port) and gRPC (h2c port)", async () => {
    const newer = { ...ConfigService.method.getConfig, name: "NoSuchMethod" };
    const transports = {
      connect: createConnectTransport({ baseUrl: urls.url, httpVersion: "1.1" }),
      "grpc-web": createGrpcWebTransport({ baseUrl: urls.url, httpVersion: "1.1" }),
      grpc: createGrpcTransport({ baseUrl: urls.grpcUrl }),
    };
    for (const [name, transport] of Object.entries(transports)) {
      const err = await transport.unary(newer, undefined, undefined, undefined, create(GetConfigRequestSchema, { namespace: "{x}", configId: "a" })).catch((e: unknown) => ConnectError.from(e));
      expect((err as ConnectError).code, name).toBe(Code.Unimplemented);
      expect((err as ConnectError).rawMessage, name).toContain("/gov.config.v1.ConfigService/NoSuchMethod");
    }
  });

  it("answers a hand-made gRPC-Web request for an unknown RPC trailers-only, with grpc-status 12", async () => {
    const res = await fetch(`${urls.url}/gov.config.v1.Nope/Get`, { method: "POST", headers: { "content-type": "application/grpc-web+proto" }, body: new Uint8Array(5) });
    expect(res.status).toBe(200);
    expect(res.headers.get("grpc-status")).toBe("12");
    expect(res.headers.get("content-type")).toBe("application/grpc-web+proto");
  });

  it("keeps the REST answer for an unknown REST path", async () => {
    const res = await fetch(`${urls.url}/v1/nothing/here`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: "not_found" });
  });

  it("refuses a content type Connect does not take with the ones it does, curl's default form type and none included", async () => {
    const url = `${urls.url}/gov.config.v1.ConfigService/ListConfigs`;
    // the gateway's port serves no gRPC (HTTP/2 only, on the gRPC port): it does not name application/grpc as taken
    const takes = "is not one /gov.config.v1.ConfigService/ListConfigs takes: application/json or application/proto (Connect), application/grpc-web (gRPC itself goes to the gRPC port, over HTTP/2)";
    const types: [string | undefined, string][] = [
      ["application/grpc", "application/grpc"], // gRPC over HTTP/1.1, sent to the wrong port
      ["text/plain", "text/plain"],
      ["application/x-www-form-urlencoded", "application/x-www-form-urlencoded"], // curl -d '{}' without -H
      ["multipart/form-data; boundary=x", "multipart/form-data; boundary=x"],
      [undefined, "none"],
    ];
    for (const [type, named] of types) {
      // a Blob body without a type sends no Content-Type
      const res = await fetch(url, { method: "POST", body: type ? "{}" : new Blob(["{}"]), headers: type ? { "content-type": type } : {} });
      expect([type, res.status, await res.json()]).toEqual([type, 415, { code: "invalid_argument", message: `content type ${named} ${takes}` }]);
    }
    // no type/subtype at all: refused before Connect-ES sees it, still with what to send
    const bare = await fetch(url, { method: "POST", body: "{}", headers: { "content-type": "foo" } });
    expect([bare.status, await bare.json()]).toEqual([415, { code: "invalid_argument", message: expect.stringMatching(/not a media type \(type\/subtype\): send .*application\/json/) }]);
  });

  it("a stream sent as plain application/json (the unary form) is told its Connect type is application/connect+json", async () => {
    const res = await fetch(`${urls.url}/gov.config.v1.ConfigService/WatchConfig`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"namespace":"{x}","configId":"a"}' });
    const body = (await res.json()) as { code: string; message: string };
    expect([res.status, body.code]).toEqual([415, "invalid_argument"]);
    expect(body.message).toMatch(/^content type application\/json is not one \/gov\.config\.v1\.ConfigService\/WatchConfig takes: it is a stream, whose Connect request is application\/connect\+json/);
    expect(body.message).not.toMatch(/takes: application\/json/);
  });

  it("accepts application/grpc-web-text on the gateway port", async () => {
    const message = toBinary(GetConfigRequestSchema, create(GetConfigRequestSchema, { namespace: "{x}", configId: "missing" }));
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]);
    const res = await fetch(`${urls.url}/gov.config.v1.ConfigService/GetConfig`, { method: "POST", headers: { "content-type": "application/grpc-web-text" }, body: frame.toString("base64") });
    expect(res.headers.get("content-type")).toBe("application/grpc-web-text+proto");
    const body = Buffer.from(await res.text(), "base64"); // one frame: the trailer of a not_found
    expect(body[0]).toBe(0x80);
    expect(body.subarray(5).toString()).toMatch(/grpc-status: ?5/);
  });
});
