import http2 from "node:http2";
import { connect } from "node:net";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, errorInterceptor, serveConnect, type ConnectServer } from "../src/index.js";
import { EchoService } from "./support/echo-service.js";

// A client that goes away mid-call is no bug of the server's: nothing is logged at error, with or without a token
// (a hostile client could otherwise flood the error log and its alerts by hanging up).

const lines: { level: number; msg: string }[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const line of chunk.toString().split("\n")) if (line.trim()) lines.push(JSON.parse(line));
    done();
  },
});
const logger = createLogger("client-gone", "info", sink);
const errors = () => lines.filter((l) => l.level >= 50).map((l) => l.msg);

let server: ConnectServer;
beforeAll(async () => {
  server = await serveConnect({
    port: 0,
    grpcPort: 0,
    logger,
    interceptors: [errorInterceptor(logger)],
    routes: (router) =>
      router.service(EchoService, {
        async say(req) {
          return { value: req.value };
        },
        async *count() {
          for (let i = 0; ; i++) {
            yield { value: String(i) };
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
        },
        async collect(requests) {
          let all = "";
          for await (const r of requests) all += r.value;
          return { value: all };
        },
        async *chat(requests) {
          for await (const r of requests) yield { value: r.value };
        },
      }),
  });
});
afterAll(() => server?.close());

describe("a client that goes away", () => {
  it("before its unary body has arrived (Connect over HTTP/1.1): nothing logged at error", async () => {
    const { hostname, port } = new URL(server.url);
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((resolve) => {
        const socket = connect(Number(port), hostname, () => {
          socket.write("POST /gov.test.v1.EchoService/Say HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{");
          setTimeout(() => socket.destroy(), 50);
        });
        socket.on("close", () => resolve());
      });
    }
    await new Promise((resolve) => setTimeout(resolve, 200)); // the server's side of the close has been handled
    expect(errors()).toEqual([]);
  });

  it("by resetting its gRPC streams (server and bidi streams over h2c): nothing logged at error", async () => {
    const session = http2.connect(server.grpcUrl);
    const frame = Buffer.from([0, 0, 0, 0, 0]); // one empty message
    for (let i = 0; i < 10; i++) {
      for (const method of ["Count", "Chat", "Collect"]) {
        const stream = session.request({ ":method": "POST", ":path": `/gov.test.v1.EchoService/${method}`, "content-type": "application/grpc", te: "trailers" });
        stream.on("error", () => {});
        stream.write(frame);
        await new Promise((resolve) => setTimeout(resolve, 2));
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    session.close();
    expect(errors()).toEqual([]);
  });
});
