import http from "node:http";
import http2 from "node:http2";
import { gunzipSync } from "node:zlib";
// What gRPC, Connect and gRPC-Web clients the project did not write see on a service's listeners: reflection and
// health (buf curl, grpc-js), unknown methods, grpc-message, deadlines on watches, grpc-web-text.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ConfigService, GetConfigRequestSchema, GetConfigResponseSchema, WatchConfigRequestSchema } from "@gov/api";
import { ServerReflection, type ServerReflectionResponse } from "@gov/api/gen/grpc/reflection/v1/reflection_pb";
import { Health, HealthCheckRequestSchema, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus as Status } from "@gov/api/gen/health/v1/health_pb";
import { configRoutes, createConfigService, createMemoryConfigStore } from "@gov/config-service";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, errorInterceptor, MAX_REQUESTS_PER_CONNECTION, serveConnect, type ConnectServer, type ServingState } from "../src/index.js";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
const buf = fileURLToPath(new URL("../../../node_modules/.bin/buf", import.meta.url));
const run = promisify(execFile);

/** A readiness the test flips, as the process runner's would flip at shutdown or on a store outage. */
function readiness(): ServingState & { set(up: boolean): void } {
  let up = true;
  const listeners = new Set<() => void>();
  return {
    serving: () => up,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    set(value) {
      up = value;
      listeners.forEach((l) => l());
    },
  };
}

async function startConfigServer(serving?: ServingState): Promise<ConnectServer> {
  const store = createMemoryConfigStore({ maxVersions: 100 });
  const limits = { maxContentBytes: 64 * 1024, maxZipBytes: 256 * 1024, maxZipEntries: 20, maxZipUncompressedBytes: 512 * 1024 };
  const impl = createConfigService({ store, namespaceRule: { requireHashTag: true }, limits });
  return serveConnect({ routes: configRoutes(impl), interceptors: [errorInterceptor(logger)], logger, port: 0, grpcPort: 0, serving });
}

/** grpc-js with a message type of ours: the client most gRPC users in Node have, no proto files needed. */
function grpcJsUnary<I extends DescMessage, O extends DescMessage>(client: grpc.Client, path: string, input: I, output: O, message: Partial<MessageShape<I>>) {
  return new Promise<MessageShape<O>>((resolve, reject) => {
    client.makeUnaryRequest(
      path,
      (m: Partial<MessageShape<I>>) => Buffer.from(toBinary(input, create(input, m as never))),
      (b: Buffer) => fromBinary(output, b),
      message,
      (err, res) => (err ? reject(err) : resolve(res!)),
    );
  });
}

const hostOf = (url: string) => new URL(url).host;
const ns = "{kit}";

describe("a service's gRPC listener", () => {
  const state = readiness();
  let server: ConnectServer;
  let client: grpc.Client;
  beforeAll(async () => {
    server = await startConfigServer(state);
    client = new grpc.Client(hostOf(server.grpcUrl), grpc.credentials.createInsecure());
    await createClient(ConfigService, createGrpcTransport({ baseUrl: server.grpcUrl })).setConfig({ namespace: ns, configId: "app.yaml", data: "port: 1\n" });
  });
  afterAll(async () => {
    client?.close();
    await server?.close();
  });

  describe("server reflection", () => {
    const bufCurl = (...args: string[]) => run(buf, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args], { timeout: 20_000 });

    it("lists the services it serves to buf curl, without the proto (v1 and v1alpha)", async () => {
      const expected = ["gov.config.v1.ConfigService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"];
      for (const protocol of ["grpc-v1", "grpc-v1alpha"]) {
        const { stdout } = await bufCurl("--reflect-protocol", protocol, "--list-services", server.grpcUrl);
        expect(stdout.trim().split("\n"), protocol).toEqual(expected);
      }
    });

    it("describes the methods and lets buf curl call one by its descriptor (google/api imports resolved)", async () => {
      const { stdout: methods } = await bufCurl("--list-methods", server.grpcUrl);
      expect(methods.trim().split("\n")).toContain("gov.config.v1.ConfigService/WatchConfig");
      const { stdout } = await bufCurl("--data", JSON.stringify({ namespace: ns, configId: "app.yaml" }), `${server.grpcUrl}/gov.config.v1.ConfigService/GetConfig`);
      expect(JSON.parse(stdout)).toMatchObject({ config: { configId: "app.yaml", data: "port: 1\n", version: 1 } });
    });

    it("answers the health check the README shows, through reflection", async () => {
      const { stdout } = await bufCurl(`${server.grpcUrl}/grpc.health.v1.Health/Check`);
      expect(JSON.parse(stdout)).toEqual({ status: "SERVING" });
    });

    it("answers an unknown symbol with a reflection error, so buf curl names what is missing", async () => {
      // A broken reflection stream would surface as unavailable/internal instead.
      await expect(bufCurl("--data", "{}", `${server.grpcUrl}/no.such.Service/Method`)).rejects.toMatchObject({ stderr: expect.stringMatching(/failed to find service named "no\.such\.Service"/) });
    });

    it("answers symbol, file and extension queries with the declaring file and its imports, each sent once", async () => {
      const reflection = createClient(ServerReflection, createGrpcTransport({ baseUrl: server.grpcUrl }));
      async function* requests() {
        yield { messageRequest: { case: "fileContainingSymbol" as const, value: "gov.config.v1.ConfigService.GetConfig" } };
        yield { messageRequest: { case: "fileByFilename" as const, value: "google/api/http.proto" } };
        yield { messageRequest: { case: "allExtensionNumbersOfType" as const, value: "google.protobuf.MethodOptions" } };
        yield { messageRequest: { case: "fileContainingSymbol" as const, value: "gov.config.v1.Nope" } };
      }
      const answers: ServerReflectionResponse["messageResponse"][] = [];
      for await (const res of reflection.serverReflectionInfo(requests())) answers.push(res.messageResponse);
      const names = (a: ServerReflectionResponse["messageResponse"]) => (a.case === "fileDescriptorResponse" ? a.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b).name) : []);
      const first = names(answers[0]);
      expect(first[0]).toBe("gov/config/v1/config.proto");
      expect(first).toEqual(expect.arrayContaining(["google/api/annotations.proto", "google/api/http.proto", "google/protobuf/descriptor.proto", "google/protobuf/timestamp.proto"]));
      expect(new Set(first).size).toBe(first.length);
      expect(names(answers[1])).toEqual(["google/api/http.proto"]); // asked for again: sent, its imports not
      // google.api.http and gov.api.v1.download_media_type, the method options the config proto uses
      expect(answers[2]).toMatchObject({ case: "allExtensionNumbersResponse", value: { extensionNumber: expect.arrayContaining([72295728, 51010]) } });
      expect(answers[2].case === "allExtensionNumbersResponse" && answers[2].value.extensionNumber.length).toBe(2);
      expect(answers[3]).toMatchObject({ case: "errorResponse", value: { errorCode: Code.NotFound } });
    });
  });

  describe("grpc.health.v1.Health through grpc-js", () => {
    const check = (service: string) => grpcJsUnary(client, "/grpc.health.v1.Health/Check", HealthCheckRequestSchema, HealthCheckResponseSchema, { service });

    it("Check reports the readiness for the server and for each served service; an unknown service is NOT_FOUND", async () => {
      expect((await check("")).status).toBe(Status.SERVING);
      expect((await check("gov.config.v1.ConfigService")).status).toBe(Status.SERVING);
      state.set(false);
      try {
        expect((await check("")).status).toBe(Status.NOT_SERVING);
      } finally {
        state.set(true);
      }
      await expect(check("no.such.Service")).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
      const long = await check("x".repeat(15_000)).catch((err: { details: string }) => err);
      expect((long as { details: string }).details.length).toBeLessThan(500); // the name is not echoed whole
    });

    it("List reports every served service; Watch of an unknown service says SERVICE_UNKNOWN instead of failing", async () => {
      const health = createClient(Health, createGrpcTransport({ baseUrl: server.grpcUrl }));
      const { statuses } = await health.list({});
      expect(Object.fromEntries(Object.entries(statuses).map(([name, s]) => [name, s.status]))).toEqual({ "": Status.SERVING, "gov.config.v1.ConfigService": Status.SERVING });
      const abort = new AbortController();
      const watch = health.watch({ service: "no.such.Service" }, { signal: abort.signal })[Symbol.asyncIterator]();
      expect((await watch.next()).value).toMatchObject({ status: Status.SERVICE_UNKNOWN });
      abort.abort();
      await watch.return?.();
    });

    it("Watch streams the current status, then each change", async () => {
      const call = client.makeServerStreamRequest(
        "/grpc.health.v1.Health/Watch",
        (m: { service: string }) => Buffer.from(toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, m))),
        (b: Buffer) => fromBinary(HealthCheckResponseSchema, b),
        { service: "" },
      );
      const seen: Status[] = [];
      const next = () => new Promise<void>((resolve) => call.once("data", (m: { status: Status }) => (seen.push(m.status), resolve())));
      call.on("error", () => {}); // the cancel below
      await next();
      state.set(false);
      await next();
      state.set(true);
      await next();
      call.cancel();
      expect(seen).toEqual([Status.SERVING, Status.NOT_SERVING, Status.SERVING]);
    });
  });

  it("answers a path that is no RPC with unimplemented whatever Fastify made of its body (not JSON, over its limit)", async () => {
    const post = (body: Buffer) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const session = http2.connect(server.grpcUrl);
        session.on("error", reject);
        const req = session.request({ ":method": "POST", ":path": "/gov.nope.v1.X/Y", "content-type": "application/json" });
        let text = "";
        let status = 0;
        req.on("response", (headers) => (status = Number(headers[":status"])));
        req.on("data", (chunk: Buffer) => (text += chunk.toString()));
        req.on("end", () => {
          session.close();
          resolve({ status, body: text });
        });
        req.on("error", reject);
        req.end(body);
      });
    const unknown = [404, { code: "unimplemented", message: expect.stringContaining("no RPC method /gov.nope.v1.X/Y") }];
    const bad = await post(Buffer.from("{"));
    expect([bad.status, JSON.parse(bad.body)]).toEqual(unknown);
    const big = await post(Buffer.alloc(2 * 1024 * 1024, "a"));
    expect([big.status, JSON.parse(big.body)]).toEqual(unknown);
  });

  it("answers an unknown gRPC method with grpc-status 12 (grpc-js)", async () => {
    const err = await grpcJsUnary(client, "/gov.config.v1.ConfigService/NoSuchMethod", GetConfigRequestSchema, GetConfigResponseSchema, {}).catch((e: grpc.ServiceError) => e);
    expect(err).toMatchObject({ code: grpc.status.UNIMPLEMENTED, details: expect.stringContaining("/gov.config.v1.ConfigService/NoSuchMethod") });
  });

  it("sends grpc-message as the spec encodes it, so grpc-js shows `: , / é %` as sent", async () => {
    const configId = "a: b, c/d é 100%";
    const err = await grpcJsUnary(client, "/gov.config.v1.ConfigService/GetConfig", GetConfigRequestSchema, GetConfigResponseSchema, { namespace: ns, configId }).catch((e: grpc.ServiceError) => e);
    expect(err).toMatchObject({ code: grpc.status.NOT_FOUND, details: `config "${configId}" does not exist in namespace "${ns}"` });
  });

  it("ends open health watches cleanly (OK) when the listener closes", async () => {
    const own = await startConfigServer();
    const c = new grpc.Client(hostOf(own.grpcUrl), grpc.credentials.createInsecure());
    try {
      const call = c.makeServerStreamRequest("/grpc.health.v1.Health/Watch", () => Buffer.alloc(0), (b: Buffer) => fromBinary(HealthCheckResponseSchema, b), {});
      call.on("error", () => {});
      await new Promise((resolve) => call.once("data", resolve));
      const status = new Promise<grpc.StatusObject>((resolve) => call.once("status", resolve));
      await own.close();
      expect((await status).code).toBe(grpc.status.OK);
    } finally {
      c.close();
    }
  });
});

describe("every protocol of a service's listeners", () => {
  let server: ConnectServer;
  beforeAll(async () => {
    server = await startConfigServer();
  });
  afterAll(() => server?.close());

  const transports = (): { name: string; transport: Transport }[] => [
    { name: "connect", transport: createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }) },
    { name: "grpc-web", transport: createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" }) },
    { name: "grpc", transport: createGrpcTransport({ baseUrl: server.grpcUrl }) },
  ];

  it(`closes an HTTP/1.1 connection after ${MAX_REQUESTS_PER_CONNECTION} requests, so a gateway's pooled connections spread again over a service's replicas`, async () => {
    // One pooled keep-alive connection at a time, as a gateway's to a busy service: behind a per-connection balancer
    // a connection that never closes stays on the replica it was made to.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const closedAfter: number[] = [];
    const connections = new Set<http.ClientRequest["socket"]>();
    try {
      for (let i = 1; i <= 2 * MAX_REQUESTS_PER_CONNECTION + 1; i++) {
        const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
          const req = http.request(`${server.url}/gov.config.v1.ConfigService/ListConfigs`, { method: "POST", agent, headers: { "content-type": "application/json" } }, resolve);
          req.on("socket", (socket) => connections.add(socket));
          req.on("error", reject);
          req.end(JSON.stringify({ namespace: ns }));
        });
        res.resume();
        await new Promise((r) => res.on("end", r));
        expect(res.statusCode).toBe(200);
        if (res.headers.connection === "close") closedAfter.push(i);
      }
    } finally {
      agent.destroy();
    }
    expect(closedAfter).toEqual([MAX_REQUESTS_PER_CONNECTION, 2 * MAX_REQUESTS_PER_CONNECTION]);
    expect(connections.size).toBe(3);
  });

  it("answers an unknown method with unimplemented", async () => {
    // A client generated from a newer proto: a method this server does not have.
    const newer = { ...ConfigService.method.getConfig, name: "NoSuchMethod" };
    for (const { name, transport } of transports()) {
      const err = await transport.unary(newer, undefined, undefined, undefined, create(GetConfigRequestSchema, { namespace: ns, configId: "x" })).catch((e: unknown) => ConnectError.from(e));
      expect((err as ConnectError).code, name).toBe(Code.Unimplemented);
    }
    const res = await fetch(`${server.url}/gov.config.v1.ConfigService/Nope`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ code: "unimplemented", message: expect.stringContaining("/gov.config.v1.ConfigService/Nope") });
  });

  it("ends a watch whose deadline passes with deadline_exceeded, not OK", async () => {
    // The timeout goes as a header only, so the client does not enforce it itself: what it reports is the server's.
    const timeoutHeader: Record<string, Record<string, string>> = { connect: { "connect-timeout-ms": "300" }, "grpc-web": { "grpc-timeout": "300m" }, grpc: { "grpc-timeout": "300m" } };
    for (const { name, transport } of transports()) {
      const ops: string[] = [];
      const err = await (async () => {
        for await (const change of createClient(ConfigService, transport).watchConfig({ namespace: ns, configId: "deadline.yaml" }, { headers: timeoutHeader[name] })) ops.push(change.op);
      })().then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(ops, name).toEqual(["current"]);
      expect(err?.code, name).toBe(Code.DeadlineExceeded);
    }
  });

  it("keeps a watch open whose deadline is beyond Node's timer range (grpc-timeout 99999999H, connect-timeout-ms 9999999999)", async () => {
    // Legal on the wire (gRPC: 8 digits of hours; Connect: 10 digits of ms), but over 2^31-1 ms a Node timer fires after 1 ms.
    const far: Record<string, Record<string, string>> = { connect: { "connect-timeout-ms": "9999999999" }, "grpc-web": { "grpc-timeout": "99999999H" }, grpc: { "grpc-timeout": "99999999H" } };
    for (const { name, transport } of transports()) {
      const abort = new AbortController();
      const ops: string[] = [];
      const err = await (async () => {
        for await (const change of createClient(ConfigService, transport).watchConfig({ namespace: ns, configId: "far-deadline.yaml" }, { headers: far[name], signal: abort.signal })) {
          ops.push(change.op);
          setTimeout(() => abort.abort(), 200);
        }
      })().then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect([ops, err?.code], name).toEqual([["current"], Code.Canceled]);
    }
  });

  it("refuses a call whose deadline is zero or under a millisecond (grpc-timeout 0n, 0m, 0S, 999u, 1n; connect-timeout-ms 0) without running it", async () => {
    const zeros: Record<string, string[]> = {
      connect: ["connect-timeout-ms: 0"],
      "grpc-web": ["grpc-timeout: 0n", "grpc-timeout: 0m", "grpc-timeout: 999u"],
      grpc: ["grpc-timeout: 0n", "grpc-timeout: 0m", "grpc-timeout: 0S", "grpc-timeout: 999u", "grpc-timeout: 1n"],
    };
    const reader = createClient(ConfigService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }));
    for (const { name, transport } of transports()) {
      const client = createClient(ConfigService, transport);
      for (const zero of zeros[name]) {
        const [header, value] = zero.split(": ");
        const configId = `zero-deadline-${name}-${value}.yaml`;
        const err = await client.setConfig({ namespace: ns, configId, data: "a: 1\n" }, { headers: { [header]: value } }).then(() => undefined, (e: unknown) => ConnectError.from(e));
        expect(err?.code, `${name} ${zero}`).toBe(Code.DeadlineExceeded);
        // not started, so nothing was written (Connect-ES would have run the handler with an aborted signal)
        expect((await reader.getConfig({ namespace: ns, configId }).catch((e: unknown) => ConnectError.from(e)) as ConnectError).code, `${name} ${zero}`).toBe(Code.NotFound);
        const seen: string[] = [];
        const watchErr = await (async () => {
          for await (const change of client.watchConfig({ namespace: ns, configId }, { headers: { [header]: value } })) seen.push(change.op);
        })().then(() => undefined, (e: unknown) => ConnectError.from(e));
        expect([seen, watchErr?.code], `${name} ${zero} watch`).toEqual([[], Code.DeadlineExceeded]);
      }
    }
  });

  it("corrects a Connect error that Connect-ES compressed (the client accepts gzip or br): an unknown key comes back cut, unary and stream", async () => {
    // Connect-ES compresses answers of 1 KiB or more, errors included; fetch, browsers and Connect clients accept gzip.
    const key = "k".repeat(5000);
    const json = JSON.stringify({ namespace: ns, configId: "app.yaml", [key]: 1 });
    const chunked = () => new Blob([json]).stream(); // no content-length: Connect-ES's path, not the plain unary one
    const unary = await fetch(`${server.url}/gov.config.v1.ConfigService/GetConfig`, {
      method: "POST",
      headers: { "content-type": "application/json", "accept-encoding": "gzip" },
      body: chunked(),
      duplex: "half",
    } as RequestInit);
    const envelope = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), Buffer.from(json)]);
    envelope.writeUInt32BE(Buffer.byteLength(json), 1);
    const stream = await fetch(`${server.url}/gov.config.v1.ConfigService/WatchConfig`, {
      method: "POST",
      headers: { "content-type": "application/connect+json", "connect-accept-encoding": "gzip" },
      body: envelope,
    });
    const frame = Buffer.from(await stream.arrayBuffer());
    const payload = frame.subarray(5);
    const end = JSON.parse((frame[0] & 1 ? gunzipSync(payload) : payload).toString()) as { error: { code: string; message: string } };
    for (const [name, error] of [["unary", (await unary.json()) as { code: string; message: string }], ["stream", end.error]] as const) {
      expect(error.code, name).toBe("invalid_argument");
      expect(error.message.length, name).toBeLessThan(300);
      expect(error.message, name).toContain(`key "${"k".repeat(64)}…" is unknown`);
    }
    expect(unary.status).toBe(400);
  });

  it("quotes a malformed deadline or an unknown compression only as an excerpt, on every protocol (contract §3: never echoes input)", async () => {
    const long = `zz${"x".repeat(3000)}`;
    const get = toBinary(GetConfigRequestSchema, create(GetConfigRequestSchema, { namespace: ns, configId: "app.yaml" }));
    const enveloped = Buffer.concat([Buffer.from([0, 0, 0, 0, get.length]), get]);
    const path = "/gov.config.v1.ConfigService/GetConfig";
    const h1 = async (headers: Record<string, string>, body: Uint8Array | string, query = "") => {
      const res = await fetch(`${server.url}${path}${query}`, { method: query ? "GET" : "POST", headers, body: query ? undefined : body, duplex: "half" } as RequestInit);
      const bytes = Buffer.from(await res.arrayBuffer());
      if (!res.headers.get("content-type")?.startsWith("application/grpc-web")) return JSON.parse(bytes.toString()) as { code: string; message: string };
      const trailer = readGrpcWebFrames(bytes).trailer;
      return { code: /grpc-status: ?(\d+)/.exec(trailer)?.[1], message: decodeURIComponent(/grpc-message: ?([^\r]*)/.exec(trailer)?.[1] ?? "") };
    };
    const h2 = (headers: Record<string, string>) =>
      new Promise<{ code?: string; message: string }>((resolve, reject) => {
        const session = http2.connect(server.grpcUrl);
        session.on("error", reject);
        const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
        stream.on("trailers", (t) => resolve({ code: String(t["grpc-status"]), message: decodeURIComponent(String(t["grpc-message"] ?? "")) }));
        stream.on("response", (h) => h["grpc-status"] !== undefined && resolve({ code: String(h["grpc-status"]), message: decodeURIComponent(String(h["grpc-message"] ?? "")) }));
        stream.on("close", () => session.close());
        stream.resume();
        stream.end(enveloped);
      });
    const json = JSON.stringify({ namespace: ns, configId: "app.yaml" });
    const answers = {
      "connect timeout": await h1({ "content-type": "application/json", "connect-timeout-ms": long }, json),
      "connect timeout, chunked": await h1({ "content-type": "application/json", "connect-timeout-ms": long }, new Blob([json]).stream() as never),
      "connect encoding": await h1({ "content-type": "application/json", "content-encoding": long }, json),
      "connect GET compression": await h1({}, "", `?connect=v1&encoding=json&compression=${long}&message=${encodeURIComponent(json)}`),
      "grpc-web timeout": await h1({ "content-type": "application/grpc-web+proto", "grpc-timeout": long }, enveloped),
      "grpc-web encoding": await h1({ "content-type": "application/grpc-web+proto", "grpc-encoding": long }, enveloped),
      "grpc timeout": await h2({ "grpc-timeout": long }),
      "grpc encoding": await h2({ "grpc-encoding": long }),
    };
    const excerpt = `zz${"x".repeat(118)}…`;
    for (const [name, { code, message }] of Object.entries(answers)) {
      expect(code, name).toBe(name.includes("timeout") ? (name.startsWith("connect") ? "invalid_argument" : "3") : name.startsWith("connect") ? "unimplemented" : "12");
      expect(message.length, name).toBeLessThan(300);
      expect(message, name).toContain(excerpt);
    }
  });

  it("sends gRPC-Web's trailer frame uncompressed and corrected when Connect-ES compressed it (grpc-accept-encoding: gzip)", async () => {
    const json = Buffer.from(JSON.stringify({ namespace: ns, configId: "app.yaml", ["k".repeat(5000)]: 1 }));
    const envelope = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), json]);
    envelope.writeUInt32BE(json.length, 1);
    const res = await fetch(`${server.url}/gov.config.v1.ConfigService/GetConfig`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+json", "grpc-accept-encoding": "gzip" },
      body: envelope,
    });
    const body = Buffer.from(await res.arrayBuffer());
    expect(body[0]).toBe(0x80); // the trailer frame, not compressed (0x81)
    const { trailer } = readGrpcWebFrames(body);
    expect(trailer).toMatch(/grpc-status: ?3/);
    // cut as on every other path, and encoded as the gRPC spec says (the wire fixes saw it): `"` as is, `…` escaped
    expect(trailer).toContain(`grpc-message: cannot decode message gov.config.v1.GetConfigRequest from JSON: key "${"k".repeat(64)}%E2%80%A6" is unknown`);
    expect(trailer.length).toBeLessThan(400);
  });

  it("refuses a message flagged compressed without a named compression, naming the header of the caller's protocol", async () => {
    const watch = toBinary(WatchConfigRequestSchema, create(WatchConfigRequestSchema, { namespace: ns, configId: "app.yaml" }));
    const flagged = Buffer.concat([Buffer.from([1, 0, 0, 0, watch.length]), watch]); // flag 1: compressed, and no encoding named
    const path = "/gov.config.v1.ConfigService/WatchConfig";
    const connect = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/connect+proto" }, body: flagged });
    const frame = Buffer.from(await connect.arrayBuffer());
    const connectError = (JSON.parse(frame.subarray(5).toString()) as { error: { code: string; message: string } }).error;
    const grpcWeb = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/grpc-web+proto", "grpc-encoding": "identity" }, body: flagged });
    const trailer = readGrpcWebFrames(Buffer.from(await grpcWeb.arrayBuffer())).trailer;
    expect(connectError.code).toBe("invalid_argument");
    expect(connectError.message).toContain("connect-content-encoding is absent or identity");
    expect(connectError.message).not.toContain("grpc-encoding");
    expect(trailer).toMatch(/grpc-status: ?3/);
    expect(decodeURIComponent(/grpc-message: ?([^\r]*)/.exec(trailer)![1])).toContain("grpc-encoding is absent or identity");
  });

  it("accepts application/grpc-web-text (base64 both ways)", async () => {
    const client = createClient(ConfigService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }));
    await client.setConfig({ namespace: ns, configId: "text.yaml", data: "a: 1\n" });
    const call = async (configId: string) => {
      const message = toBinary(GetConfigRequestSchema, create(GetConfigRequestSchema, { namespace: ns, configId }));
      const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), message]);
      frame.writeUInt32BE(message.length, 1);
      // Split in two base64 segments, each padded, as grpc-web clients may send them.
      const body = frame.subarray(0, 7).toString("base64") + frame.subarray(7).toString("base64");
      const res = await fetch(`${server.url}/gov.config.v1.ConfigService/GetConfig`, { method: "POST", headers: { "content-type": "application/grpc-web-text", "x-grpc-web": "1" }, body });
      expect(res.headers.get("content-type")).toBe("application/grpc-web-text+proto");
      return readGrpcWebFrames(fromBase64Segments(await res.text()));
    };
    const found = await call("text.yaml");
    expect(fromBinary(GetConfigResponseSchema, found.messages[0]).config?.data).toBe("a: 1\n");
    expect(found.trailer).toMatch(/grpc-status: ?0/);
    const missing = await call("missing.yaml");
    expect(missing.messages).toHaveLength(0);
    expect(missing.trailer).toMatch(/grpc-status: ?5/);
  });

  it("writes grpc-message in gRPC-Web's trailer frame as the spec encodes it", async () => {
    const message = toBinary(GetConfigRequestSchema, create(GetConfigRequestSchema, { namespace: ns, configId: "a: b, c/d é 100%" }));
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]);
    const res = await fetch(`${server.url}/gov.config.v1.ConfigService/GetConfig`, { method: "POST", headers: { "content-type": "application/grpc-web+proto" }, body: frame });
    const { trailer } = readGrpcWebFrames(Buffer.from(await res.arrayBuffer()));
    expect(trailer).toContain(`grpc-message: config "a: b, c/d %C3%A9 100%25" does not exist in namespace "${ns}"\r\n`);
  });

  it("refuses a grpc-web-text body that is not base64 with invalid_argument", async () => {
    const res = await fetch(`${server.url}/gov.config.v1.ConfigService/GetConfig`, { method: "POST", headers: { "content-type": "application/grpc-web-text" }, body: "{not: base64}" });
    const { trailer } = readGrpcWebFrames(fromBase64Segments(await res.text()));
    expect(trailer).toMatch(/grpc-status: ?3/);
    expect(trailer).toContain("not valid base64");
  });
});

/** grpc-web-text may pad each chunk, so `=` can occur mid-body; Node's decoder stops at the first one. */
const fromBase64Segments = (text: string) => Buffer.concat(text.split(/(?<==)(?=[^=])/).map((s) => Buffer.from(s, "base64")));

/** gRPC-Web frames: 1 flag byte (0x80 = trailer), 4 length bytes, payload. */
function readGrpcWebFrames(bytes: Buffer): { messages: Buffer[]; trailer: string } {
  const messages: Buffer[] = [];
  let trailer = "";
  for (let at = 0; at < bytes.length; ) {
    const flag = bytes[at];
    const length = bytes.readUInt32BE(at + 1);
    const payload = bytes.subarray(at + 5, at + 5 + length);
    if (flag & 0x80) trailer += payload.toString("latin1");
    else messages.push(payload);
    at += 5 + length;
  }
  return { messages, trailer };
}
