// The gRPC (h2c) listener holds a request's headers to the HTTP/1.1 listener's limit (Node's 16 KiB): 20 KiB of
// metadata were served on h2c and refused on HTTP/1.1, and a header list of any size up to nghttp2's own bounds was
// decoded and handed to the handler.
import http2 from "node:http2";
import { connect } from "node:net";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { StringValueSchema } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, serveConnect, type ConnectServer } from "../src/index.js";
import { EchoService } from "./support/echo-service.js";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
const text = (value: string) => create(StringValueSchema, { value });
const KiB = 1024;
/** What both listeners tell a request over the limit, after what its headers are. */
const OVER_LIMIT = /are over 16 KiB together \(Node's max-http-header-size\): send .*shorter headers/;

let handled = 0;
const echoImpl = {
  say: async (req: { value: string }) => (handled++, text(`said ${req.value}`)),
  async *count() {},
  collect: async () => text(""),
  async *chat() {},
};

/** A grpc-js unary Say with `bytes` of metadata in one header, on `client`: its answer, or its error's code and details. */
function say(client: grpc.Client, bytes: number): Promise<{ ok: string } | { code: grpc.status; details: string }> {
  const metadata = new grpc.Metadata();
  if (bytes) metadata.set("x-big", "a".repeat(bytes));
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      "/gov.test.v1.EchoService/Say",
      (m: ReturnType<typeof text>) => Buffer.from(toBinary(StringValueSchema, m)),
      (b: Buffer) => fromBinary(StringValueSchema, b),
      text("hi"),
      metadata,
      { deadline: Date.now() + 5000 },
      (err, res) => resolve(err ? { code: err.code, details: err.details } : { ok: res!.value }),
    );
  });
}

/** A raw HTTP/1.1 Connect call with `bytes` of one header: the status line and the body. */
function http1Say(url: string, bytes: number): Promise<{ status: string; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let got = "";
    socket.on("data", (d) => (got += d.toString("latin1"))).on("error", () => {});
    socket.on("close", () => resolve({ status: got.split("\r\n")[0], body: got.slice(got.indexOf("\r\n\r\n") + 4) }));
    socket.write(`POST /gov.test.v1.EchoService/Say HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nX-Big: ${"a".repeat(bytes)}\r\nContent-Length: 4\r\n\r\n"hi"`);
  });
}

describe("a request's headers on the gRPC (h2c) listener", () => {
  let server: ConnectServer;
  let client: grpc.Client;
  beforeAll(async () => {
    server = await serveConnect({ routes: (r) => r.service(EchoService, echoImpl as never), logger, port: 0, grpcPort: 0 });
    client = new grpc.Client(new URL(server.grpcUrl).host, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await server?.close();
  });

  it("are held to HTTP/1.1's 16 KiB: 20 KiB of metadata is INVALID_ARGUMENT with HTTP/1.1's reason (grpc-js), not run; 15 KiB is served", async () => {
    expect(await say(client, 15 * KiB)).toEqual({ ok: "said hi" });
    const h1 = await http1Say(server.url, 20 * KiB);
    expect(h1.status).toBe("HTTP/1.1 400 Bad Request");
    expect(JSON.parse(h1.body)).toMatchObject({ code: "invalid_argument", message: expect.stringMatching(OVER_LIMIT) });

    const before = handled;
    for (const bytes of [20 * KiB, 60 * KiB]) {
      const refused = await say(client, bytes);
      expect(refused).toEqual({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringMatching(OVER_LIMIT) });
    }
    expect(handled).toBe(before);
    expect(await say(client, 0)).toEqual({ ok: "said hi" }); // the same connection serves on
  });

  it("over Node's decoding cap (4 × the limit) are reset, the stream only: grpc-js reads RESOURCE_EXHAUSTED, the connection serves on", async () => {
    const before = handled;
    expect(await say(client, 80 * KiB)).toEqual({ code: grpc.status.RESOURCE_EXHAUSTED, details: expect.any(String) });
    expect(handled).toBe(before);
    expect(await say(client, 0)).toEqual({ ok: "said hi" });
  });

  it("a Connect call over h2c — the first stream of a connection, sent before the client acknowledged the server's settings — gets 400 {code, message}", async () => {
    const session = http2.connect(server.grpcUrl);
    try {
      const req = session.request({ ":method": "POST", ":path": "/gov.test.v1.EchoService/Say", "content-type": "application/json", "x-big": "a".repeat(20 * KiB) });
      req.end('"hi"');
      const [headers, body] = await Promise.all([
        new Promise<http2.IncomingHttpHeaders>((r) => req.once("response", r)),
        new Promise<string>((resolve) => {
          let got = "";
          req.on("data", (d) => (got += d)).on("end", () => resolve(got));
        }),
      ]);
      expect(headers[":status"]).toBe(400);
      const answer = JSON.parse(body);
      expect(Object.keys(answer).sort()).toEqual(["code", "message"]);
      expect(answer).toMatchObject({ code: "invalid_argument", message: expect.stringMatching(OVER_LIMIT) });
    } finally {
      session.close();
    }
  });
});
