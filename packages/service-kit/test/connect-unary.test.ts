import { request } from "node:http";
import { gunzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { StringValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, errorInterceptor, serveConnect, type ConnectServer } from "../src/index.js";
import { EchoService } from "./support/echo-service.js";

// The lean Connect unary path (connect-unary.ts) must answer exactly as Connect-ES does. Each request is sent twice:
// with its Content-Length (the lean path) and chunked (which the lean path leaves to Connect-ES), and the answers
// compared: status, content type, the headers the handler and the error set, and the body.

const urls: string[] = [];
const seeUrl: Interceptor = (next) => (req) => {
  urls.push(req.url);
  return next(req);
};

let server: ConnectServer;
/** Calls of Say that reached the handler. */
let handled = 0;
beforeAll(async () => {
  server = await serveConnect({
    port: 0,
    grpcPort: 0,
    logger: createLogger("connect-unary", "silent"),
    interceptors: [seeUrl, errorInterceptor(createLogger("connect-unary", "silent"))],
    readMaxBytes: 64 * 1024,
    routes: (router) =>
      router.service(EchoService, {
        async say(req, ctx: HandlerContext) {
          handled++;
          ctx.responseHeader.set("x-t-header", "h");
          ctx.responseTrailer.set("x-t-trailer", "t");
          if (req.value === "fail") {
            ctx.responseHeader.set("www-authenticate", 'Bearer realm="test"');
            throw new ConnectError("the token is not valid: log in again", Code.Unauthenticated);
          }
          if (req.value === "precondition") throw new ConnectError("the service still has live instances: deregister them first", Code.FailedPrecondition);
          // slow enough that an answer at its deadline (50 ms) is told apart from one at its end on a stalled CI too
          if (req.value === "slow") await new Promise((resolve) => setTimeout(resolve, 1500));
          if (req.value === "big") return { value: "x".repeat(5000) };
          return { value: req.value.toUpperCase() };
        },
        async *count() {},
        async collect() {
          return { value: "" };
        },
        async *chat() {},
      }),
  });
});
afterAll(() => server.close());

interface Answer {
  status: number;
  type: string | undefined;
  headers: Record<string, string | undefined>;
  body: string;
}

/** POSTs `body` to Say, with its length or chunked; the answer with a gzip body inflated. */
function say(body: Buffer, type: string, chunked: boolean, extra: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { "content-type": type, ...extra };
    if (!chunked) headers["content-length"] = String(body.length);
    const req = request(`${server.url}/gov.test.v1.EchoService/Say`, { method: "POST", headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        let bytes = Buffer.concat(chunks);
        if (res.headers["content-encoding"] === "gzip") bytes = gunzipSync(bytes);
        const pick = ["x-t-header", "trailer-x-t-trailer", "www-authenticate", "content-encoding"];
        resolve({
          status: res.statusCode ?? 0,
          type: res.headers["content-type"],
          headers: Object.fromEntries(pick.map((h) => [h, res.headers[h] as string | undefined])),
          body: type === "application/proto" && res.statusCode === 200 ? bytes.toString("base64") : bytes.toString(),
        });
      });
    });
    req.on("error", reject);
    if (chunked) {
      req.write(body.subarray(0, 1));
      req.end(body.subarray(1));
    } else req.end(body);
  });
}

const proto = (value: string) => Buffer.from(toBinary(StringValueSchema, create(StringValueSchema, { value })));

describe("plain Connect unary calls answer as Connect-ES answers them", () => {
  const cases: [string, Buffer, string, Record<string, string>?][] = [
    ["binary", proto("hello"), "application/proto"],
    ["JSON", Buffer.from('"hello"'), "application/json"],
    ["JSON with charset", Buffer.from('"hello"'), "application/json; charset=utf-8"],
    ["undecodable binary", Buffer.from([0xff, 0xff, 0xff, 0x01]), "application/proto"],
    ["malformed JSON", Buffer.from("{"), "application/json"],
    ["JSON of the wrong type", Buffer.from("123"), "application/json"],
    ["a handler's error with its headers", Buffer.from('"fail"'), "application/json"],
    ["a large answer to a client that accepts gzip", Buffer.from('"big"'), "application/json", { "accept-encoding": "gzip" }],
    ["a large answer to a client that refuses gzip (gzip;q=0)", Buffer.from('"big"'), "application/json", { "accept-encoding": "gzip;q=0, br;q=1" }],
    ["failed_precondition (412 on both paths, the contract's table; Connect's own says 400)", Buffer.from('"precondition"'), "application/json"],
  ];
  for (const [name, body, type, extra] of cases) {
    it(name, async () => {
      urls.length = 0;
      const lean = await say(body, type, false, extra);
      const leanUrls = urls.splice(0);
      const connect = await say(body, type, true, extra);
      expect(lean).toEqual(connect);
      if (name.startsWith("failed_precondition")) expect([lean.status, JSON.parse(lean.body).code]).toEqual([412, "failed_precondition"]);
      if (name.includes("gzip;q=0")) expect(lean.headers["content-encoding"]).toBeUndefined();
      // the two forms really took two paths (a call that got past decoding shows its URL to the interceptors)
      if (leanUrls.length > 0) expect(leanUrls[0]).not.toBe(urls[0]);
    });
  }

  it("a content type Connect does not take is refused with the ones it does, curl's default form type included", async () => {
    for (const type of ["text/plain", "application/x-www-form-urlencoded"]) {
      for (const chunked of [false, true]) {
        const answer = await say(Buffer.from('"hello"'), type, chunked);
        expect([answer.status, JSON.parse(answer.body)]).toEqual([
          415,
          { code: "invalid_argument", message: `content type ${type} is not one /gov.test.v1.EchoService/Say takes: application/json or application/proto (Connect), application/grpc, application/grpc-web` },
        ]);
      }
    }
  });

  it("over the limit: refused by its declared length, before reading, naming the limit", async () => {
    const big = Buffer.from(JSON.stringify("y".repeat(70 * 1024)));
    const lean = await say(big, "application/json", false);
    expect(lean.status).toBe(429);
    expect(JSON.parse(lean.body)).toEqual({
      code: "resource_exhausted",
      message: `the request message is ${big.length} bytes, over the limit of 65536 bytes (the listener's message limit): send a smaller one`,
    });
  });

  it("a deadline that passes: deadline_exceeded when it passes, not when a handler that ignores it is done", async () => {
    const started = Date.now();
    const lean = await say(Buffer.from('"slow"'), "application/json", false, { "connect-timeout-ms": "50" });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(lean.status).toBe(504);
    expect(JSON.parse(lean.body).code).toBe("deadline_exceeded");
    // Say is not NO_SIDE_EFFECTS: a write cut by its deadline may have been applied, and the answer says so
    expect(JSON.parse(lean.body).message).toContain("may or may not have been applied");
  });

  it("a deadline beyond Node's timer range (connect-timeout-ms: 9999999999, ~115 days) does not fire at once", async () => {
    for (const chunked of [false, true]) {
      const answer = await say(Buffer.from('"slow"'), "application/json", chunked, { "connect-timeout-ms": "9999999999" });
      expect([answer.status, answer.body], chunked ? "Connect-ES" : "lean path").toEqual([200, '"SLOW"']);
    }
  });

  it("a deadline already passed (connect-timeout-ms: 0) is refused without running the handler", async () => {
    const before = handled;
    const lean = await say(Buffer.from('"hello"'), "application/json", false, { "connect-timeout-ms": "0" });
    expect([lean.status, JSON.parse(lean.body).code]).toEqual([504, "deadline_exceeded"]);
    expect(JSON.parse(lean.body).message).not.toContain("may or may not");
    expect(handled).toBe(before);
  });
});
