// What a client that does not speak HTTP/2 gets on a gRPC (h2c) port: plain HTTP/1.1 (curl without
// --http2-prior-knowledge) is answered in the contract's shape with the way to the HTTP/1.1 port — it got a binary
// SETTINGS + GOAWAY, which curl shows as "Received HTTP/0.9 when not allowed" — and gRPC clients are served as before.
import { connect } from "node:net";
import { create } from "@bufbuild/protobuf";
import { StringValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProcess, createLogger, serveConnect, type BuiltProcess, type ConnectServer, type Logger, type ProcessUrls, type ServiceModule } from "../src/index.js";
import { firstBytes } from "../src/grpc/http1-on-h2c.js";
import { EchoService } from "./support/echo-service.js";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
const text = (value: string) => create(StringValueSchema, { value });

const echoImpl = {
  say: async (req: { value: string }) => text(`said ${req.value}`),
  async *count() {},
  collect: async () => text(""),
  async *chat() {},
};
const echoModule: ServiceModule = {
  name: "echo",
  services: [EchoService],
  settings: {},
  ports: { port: 0, grpcPort: 0 },
  async create() {
    return { impls: [{ service: EchoService, impl: echoImpl as never }], health: () => ({ status: "UP" }), close: async () => {} };
  },
};

interface Exchange {
  /** Everything the server sent, until it closed the connection. */
  received: Buffer;
  /** The server closed the connection (within the test's bound) without the client closing it. */
  closedByServer: boolean;
}

/**
 * Sends `chunks` on a raw TCP connection, `gapMs` apart (then ends its side, with `end`), and collects the answer until
 * the server closes, `enough` holds for what came (the client closes then), or 5 s.
 */
function exchange(url: string, chunks: (string | Buffer)[], { gapMs = 0, end = false, enough }: { gapMs?: number; end?: boolean; enough?: (received: Buffer) => boolean } = {}): Promise<Exchange> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const received: Buffer[] = [];
    const bound = setTimeout(() => {
      socket.destroy();
      resolve({ received: Buffer.concat(received), closedByServer: false });
    }, 5000);
    socket.on("data", (c) => {
      received.push(c);
      if (enough?.(Buffer.concat(received))) {
        clearTimeout(bound);
        socket.destroy();
        resolve({ received: Buffer.concat(received), closedByServer: false });
      }
    });
    socket.on("error", (err) => (clearTimeout(bound), reject(err)));
    socket.on("close", () => {
      clearTimeout(bound);
      resolve({ received: Buffer.concat(received), closedByServer: true });
    });
    socket.on("connect", async () => {
      for (const chunk of chunks) {
        if (socket.destroyed) return;
        socket.write(chunk);
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
      if (end) socket.end();
    });
  });
}

/** An HTTP/1.1 answer: status line, headers (lower-case names), body. */
function parseHttp1(bytes: Buffer) {
  const raw = bytes.toString("latin1");
  const end = raw.indexOf("\r\n\r\n");
  expect(end, `not an HTTP/1.1 answer: ${JSON.stringify(raw.slice(0, 80))}`).toBeGreaterThan(0);
  const [statusLine, ...lines] = raw.slice(0, end).split("\r\n");
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  return { statusLine, headers, body: bytes.subarray(Buffer.byteLength(raw.slice(0, end + 4), "latin1")).toString("utf8") };
}

/** A process serving the echo module on free ports, with the given shutdown grace (and more settings, another logger). */
async function echoProcess(grace: string, env: Record<string, string> = {}, log: Logger = logger): Promise<{ proc: BuiltProcess; urls: ProcessUrls }> {
  const proc = await buildProcess({ name: "t", modules: [echoModule], ids: false, sources: { file: {}, env: { GOV_SHUTDOWN_GRACE: grace, ...env } }, logger: log });
  return { proc, urls: await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" }) };
}

/** A raw TCP connection to `url`, once connected. */
async function rawConnection(url: string) {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.on("error", () => {});
  await new Promise((r) => socket.once("connect", r));
  return socket;
}

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n`;

describe("HTTP/1.1 sent to a process's gRPC (h2c) port", () => {
  let proc: BuiltProcess;
  let urls: ProcessUrls;
  beforeAll(async () => {
    ({ proc, urls } = await echoProcess("2s"));
  });
  afterAll(async () => proc?.shutdown());
  const grpcSay = (value: string) => createClient(EchoService, createGrpcTransport({ baseUrl: urls.grpcUrl! })).say(text(value));

  it("is answered 412 failed_precondition with the HTTP/1.1 port to use, and the connection is closed; gRPC still works there", async () => {
    const { received, closedByServer } = await exchange(urls.grpcUrl!, [get("/v1/namespaces")]);
    const answer = parseHttp1(received);
    expect(answer.statusLine).toBe("HTTP/1.1 412 Precondition Failed");
    expect(answer.headers["content-type"]).toBe("application/json");
    expect(answer.headers.connection).toBe("close");
    expect(Number(answer.headers["content-length"])).toBe(Buffer.byteLength(answer.body));
    const body = JSON.parse(answer.body);
    expect(Object.keys(body).sort()).toEqual(["code", "message"]);
    expect(body.code).toBe("failed_precondition");
    const port = new URL(urls.url).port;
    expect(body.message).toBe(
      `this port speaks HTTP/2 only (gRPC): send Connect and gRPC-Web requests over HTTP/1.1 to port ${port} (${urls.url}); ` +
        "for gRPC use an HTTP/2 client (e.g. grpcurl -plaintext, buf curl --http2-prior-knowledge; Connect over HTTP/2: curl --http2-prior-knowledge)",
    );
    expect(closedByServer).toBe(true);
    expect((await grpcSay("after")).value).toBe("said after");
  });

  it("a request line that arrives a few bytes at a time, a HEAD, and a request with a body are answered the same way", async () => {
    const split = await exchange(urls.grpcUrl!, ["G", "E", "T", " ", "/", get("/x").slice(5)], { gapMs: 20 });
    expect(parseHttp1(split.received).statusLine).toBe("HTTP/1.1 412 Precondition Failed");
    expect(split.closedByServer).toBe(true);

    const head = await exchange(urls.grpcUrl!, [get("/v1/namespaces").replace("GET", "HEAD")]);
    const headAnswer = parseHttp1(head.received);
    expect(headAnswer.statusLine).toBe("HTTP/1.1 412 Precondition Failed");
    expect(Number(headAnswer.headers["content-length"])).toBeGreaterThan(0);
    expect(headAnswer.body).toBe("");

    // a body the server never reads: the answer must not be lost to a reset while the client is still sending
    const body = Buffer.alloc(256 * 1024, "x");
    const post = await exchange(urls.grpcUrl!, [`POST /v1/namespaces/%7Bdev%7D/configs/a HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${body.length}\r\n\r\n`, body]);
    const postAnswer = parseHttp1(post.received);
    expect(postAnswer.statusLine).toBe("HTTP/1.1 412 Precondition Failed");
    expect(JSON.parse(postAnswer.body).code).toBe("failed_precondition");
    expect(post.closedByServer).toBe(true);
  });

  it("an HTTP/2 preface that arrives in pieces is still HTTP/2; an empty connection, a TLS ClientHello and noise are closed without harm", async () => {
    const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]); // an empty SETTINGS frame
    const h2 = await exchange(urls.grpcUrl!, [preface.slice(0, 3), preface.slice(3, 17), preface.slice(17), settings], { gapMs: 30, enough: (got) => got.length >= 9 });
    // the server's first frame: its SETTINGS (type 4 on stream 0), not an HTTP/1.1 answer
    expect(h2.received[3]).toBe(4);
    expect(h2.received.subarray(0, 5).toString("latin1")).not.toBe("HTTP/");

    expect((await exchange(urls.grpcUrl!, [], { end: true })).closedByServer).toBe(true);
    // a TLS 1.2 ClientHello's first bytes (https:// to this port): no HTTP/1.1 answer; HTTP/2 refuses it and closes
    const hello = Buffer.from("16030100c4010000c00303" + "00".repeat(40), "hex");
    const tls = await exchange(urls.grpcUrl!, [hello]);
    expect(tls.closedByServer).toBe(true);
    expect(tls.received.subarray(0, 5).toString("latin1")).not.toBe("HTTP/");
    const noise = await exchange(urls.grpcUrl!, [Buffer.from([0, 1, 2, 3, 255, 254, 10, 13])]);
    expect(noise.closedByServer).toBe(true);

    expect((await grpcSay("still")).value).toBe("said still");
  });
});

describe("the access log of a process's gRPC port", () => {
  /** A logger that keeps its JSON lines in memory. */
  const memoryLogger = () => {
    const lines: Record<string, unknown>[] = [];
    return { lines, log: createLogger("test", "info", { write: (line: string) => void lines.push(JSON.parse(line)) }) };
  };

  it("gov.log.access=true logs each 412 answer to HTTP/1.1 as one request line, as the HTTP/1.1 port logs what is not HTTP; off by default", async () => {
    for (const access of [undefined, "true"]) {
      const { lines, log } = memoryLogger();
      const { proc, urls } = await echoProcess("1s", access ? { GOV_LOG_ACCESS: access } : {}, log);
      try {
        const requests = () => lines.filter((l) => l.msg === "request completed");
        // a request line a few bytes at a time, a HEAD, and a burst: one line per answered request, not per chunk
        await exchange(urls.grpcUrl!, ["G", "E", "T", " ", "/", get("/v1/namespaces").slice(5)], { gapMs: 10 });
        await exchange(urls.grpcUrl!, [get("/x").replace("GET", "HEAD")]);
        await Promise.all(Array.from({ length: 20 }, () => exchange(urls.grpcUrl!, [get("/burst")])));
        // an HTTP/2 client and a TLS ClientHello are no such answer
        await exchange(urls.grpcUrl!, [Buffer.from("16030100c4010000c00303" + "00".repeat(40), "hex")]);
        if (!access) {
          await new Promise((r) => setTimeout(r, 100));
          expect(requests()).toEqual([]);
          continue;
        }
        await expect.poll(() => requests().length).toBe(22);
        await new Promise((r) => setTimeout(r, 100));
        expect(requests().length).toBe(22);
        // answered once "GET /" had come: the rest of the target is not waited for, and the line says so
        expect(requests()[0]).toMatchObject({ level: 30, req: { method: "GET", url: "/…", remoteAddress: "127.0.0.1" }, res: { statusCode: 412 } });
        expect(requests()[1]).toMatchObject({ req: { method: "HEAD", url: "/x" }, res: { statusCode: 412 } });
        expect(requests().slice(2).every((l) => (l.req as { url: string }).url === "/burst")).toBe(true);
      } finally {
        await proc.shutdown();
      }
    }
  });
});

describe("a gRPC port's shutdown", () => {
  it("does not wait for a connection that has sent nothing yet", async () => {
    const { proc, urls } = await echoProcess("3s");
    const silent = await rawConnection(urls.grpcUrl!);
    silent.resume(); // it reads (and so sees the server close the connection), as every client does
    await new Promise((r) => setTimeout(r, 50)); // accepted by the server
    const started = Date.now();
    await proc.shutdown();
    silent.destroy();
    expect(Date.now() - started).toBeLessThan(2000);
  }, 10_000);

  it("ends at the grace's end with an HTTP/2 client that neither reads nor closes", async () => {
    const { proc, urls } = await echoProcess("1s");
    const stuck = await rawConnection(urls.grpcUrl!);
    // the preface and an empty SETTINGS frame; once the server's SETTINGS came (its session is made), it reads
    // nothing more and never closes its side
    const settings = new Promise((r) => stuck.once("data", r));
    stuck.write(Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1"), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])]));
    await settings;
    stuck.pause();
    const started = Date.now();
    // before the fix: Node's destroy() of the GOAWAY'd session only ended its socket and waited for this client's FIN
    const outcome = await Promise.race([proc.shutdown().then(() => "stopped"), new Promise((r) => setTimeout(r, 8000, "still running"))]);
    stuck.destroy();
    expect(outcome).toBe("stopped");
    expect(Date.now() - started).toBeLessThan(6000); // the 1 s grace, then the cleanup
  }, 15_000);
});

describe("serveConnect's gRPC port", () => {
  let server: ConnectServer;
  beforeAll(async () => {
    server = await serveConnect({ routes: (r) => r.service(EchoService, echoImpl as never), logger, port: 0, grpcPort: 0 });
  });
  afterAll(async () => server?.close());

  it("names its HTTP/1.1 listener to a plain HTTP/1.1 request", async () => {
    const answer = parseHttp1((await exchange(server.grpcUrl, [get("/")])).received);
    expect(answer.statusLine).toBe("HTTP/1.1 412 Precondition Failed");
    expect(JSON.parse(answer.body).message).toContain(`send Connect and gRPC-Web requests over HTTP/1.1 to port ${new URL(server.url).port} (${server.url})`);
  });
});

describe("firstBytes", () => {
  it("tells the HTTP/2 preface, an HTTP/1.x request line and anything else apart, waiting while it cannot tell", () => {
    const of = (s: string) => firstBytes(Buffer.from(s, "latin1"));
    expect(of("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")).toBe("h2");
    expect(of("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00")).toBe("h2");
    expect(of("PRI * HTTP/2")).toBe("more");
    expect(of("P")).toBe("more");
    expect(of("POS")).toBe("more");
    expect(of("POST ")).toBe("more");
    expect(of("POST /v1 HTTP/1.1")).toBe("http1");
    expect(of("GET /")).toBe("http1");
    expect(of("OPTIONS *")).toBe("http1");
    expect(of("PRI * HTTP/1.1\r\n")).toBe("http1");
    expect(of("\x16\x03\x01\x00")).toBe("neither");
    expect(of("GET  /")).toBe("neither");
    expect(of("A".repeat(30))).toBe("neither");
    expect(of(" GET /")).toBe("neither");
  });
});
