import http2 from "node:http2";
import net from "node:net";
import { getOption, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { http } from "@gov/api";
import { describe, expect, it } from "vitest";

/** Where the service under attack listens. */
export interface HostileTarget {
  /** The REST gateway, `http://host:port` (paths from the `google.api.http` rules are appended). */
  restUrl: string;
  /** HTTP/1.1 listener serving Connect and gRPC-Web. */
  connectUrl: string;
  /** h2c listener serving gRPC. */
  grpcUrl: string;
}

export interface HostileInputOptions {
  service: DescService;
  /** Called once (in a test) to learn the URLs; start the listeners in the caller's beforeAll. */
  target: () => HostileTarget;
  /** false: the target has no REST gateway (a service's own listeners); only the RPC attacks run. Default true. */
  rest?: boolean;
  /** Values for path variables (`{namespace}` → "{hostile}"); anything not listed gets "x". */
  pathValues?: Record<string, string>;
  limits: {
    /** Largest REST body the gateway takes (gov.limits.json-body as configured). */
    restBody: number;
    /** Largest RPC message the Connect, gRPC-Web and gRPC listeners take (their readMaxBytes). */
    message: number;
    /** gov.limits.request-timeout as configured (keep it small in tests: slow bodies wait for it). */
    requestTimeoutMs: number;
  };
  /** Most RSS growth (bytes) any single attack may cost the test process, which hosts the server. Default 64 MiB. */
  maxRssGrowth?: number;
  /**
   * A watch route to hold open without reading; when omitted the non-reading-watcher case is registered as a todo.
   * `open` starts one watch that never reads and returns a closer; `write` causes one large change.
   */
  nonReadingWatchers?: { open: () => Promise<() => void>; write: (i: number) => Promise<void>; count: number; updates: number };
}

interface Route {
  method: DescMethod;
  verb: string;
  template: string;
  hasBody: boolean;
}

function restRoutes(service: DescService): Route[] {
  const routes: Route[] = [];
  for (const method of service.methods) {
    const rule = getOption(method, http);
    if (!rule || rule.pattern.case === undefined || rule.pattern.case === "custom") continue;
    routes.push({ method, verb: rule.pattern.case.toUpperCase(), template: rule.pattern.value, hasBody: rule.body !== "" });
  }
  return routes;
}

const fill = (template: string, values: Record<string, string>, override?: { name: string; raw: string }) =>
  template.replace(/\{([a-z_][a-z0-9_]*)\}/g, (_, name: string) => (override?.name === name ? override.raw : encodeURIComponent(values[name] ?? "x")));

const firstVariable = (template: string) => /\{([a-z_][a-z0-9_]*)\}/.exec(template)?.[1];

/** Not valid protobuf for any message: field 1 with wire type 7 (no such type), then a truncated varint. */
const GARBAGE_PROTO = new Uint8Array([0x0f, 0xff, 0xff, 0xff]);

const envelope = (flags: number, payload: Uint8Array, declared = payload.length) => {
  const out = new Uint8Array(5 + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, declared);
  out.set(payload, 5);
  return out;
};

/** The error shape every listener owes a REST or Connect client. */
async function expectErrorShape(res: Response, status: number, code: string, forbidden?: string): Promise<{ code: string; message: string }> {
  const text = await res.text();
  expect([res.status, text.slice(0, 300)]).toEqual([status, expect.anything()]);
  expect(res.headers.get("content-type") ?? "").toMatch(/^application\/json/);
  const body = JSON.parse(text) as { code: string; message: string };
  expect(Object.keys(body).sort()).toEqual(["code", "message"]);
  expect(body.code).toBe(code);
  expect(body.message.length).toBeGreaterThan(10);
  if (forbidden) expect(text.includes(forbidden)).toBe(false); // oversized input is never echoed back
  return body;
}

/** gRPC-Web's status, read from the trailer frame at the end of the body. */
function grpcWebStatus(body: Uint8Array): { status: string | undefined; message: string } {
  let offset = 0;
  while (offset + 5 <= body.length) {
    const len = new DataView(body.buffer, body.byteOffset + offset + 1, 4).getUint32(0);
    if (body[offset] & 0x80) {
      const text = new TextDecoder().decode(body.subarray(offset + 5, offset + 5 + len));
      return { status: /grpc-status:\s*(\d+)/.exec(text)?.[1], message: /grpc-message:\s*(.*)/.exec(text)?.[1] ?? "" };
    }
    offset += 5 + len;
  }
  return { status: undefined, message: "" };
}

/** One gRPC call over h2c with raw bytes; resolves with the status from the trailers (or trailers-only headers). */
function grpcCall(url: string, path: string, chunks: Uint8Array[], options: { trickleMs?: number; timeoutMs: number }): Promise<{ status: string | undefined; message: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc+proto", te: "trailers" });
    let status: string | undefined;
    let message = "";
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      session.destroy(); // a server that answers before the request ended leaves the client's half open
      resolve({ status, message });
    };
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h["grpc-status"] !== undefined) {
        status = String(h["grpc-status"]);
        message = decodeURIComponent(String(h["grpc-message"] ?? ""));
        finish();
      }
    };
    const timer = setTimeout(() => {
      session.destroy();
      reject(new Error(`no gRPC answer within ${options.timeoutMs} ms`));
    }, options.timeoutMs);
    stream.on("response", take);
    stream.on("trailers", take);
    stream.on("data", () => undefined);
    stream.on("error", () => undefined);
    stream.on("close", finish);
    if (options.trickleMs) {
      let i = 0;
      const bytes = Buffer.concat(chunks);
      const drip = setInterval(() => {
        if (stream.closed || i >= bytes.length) return clearInterval(drip);
        stream.write(bytes.subarray(i, ++i));
      }, options.trickleMs);
      stream.on("close", () => clearInterval(drip));
    } else {
      for (const c of chunks) stream.write(c);
      stream.end();
    }
  });
}

/** An HTTP/1.1 request whose body trickles one byte per `everyMs`; resolves with the status line and body received. */
function trickle(url: string, head: string, bodyLength: number, everyMs: number, timeoutMs: number): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let received = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server still waited for the body after ${timeoutMs} ms`));
    }, timeoutMs);
    let sent = 0;
    const drip = setInterval(() => {
      if (sent < bodyLength - 1 && socket.writable) {
        socket.write("a");
        sent++;
      }
    }, everyMs);
    socket.on("connect", () => socket.write(`${head}Content-Length: ${bodyLength}\r\n\r\n`));
    socket.on("data", (d) => (received += d.toString("latin1")));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearTimeout(timer);
      clearInterval(drip);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0);
      resolve({ status, body: received.slice(received.indexOf("\r\n\r\n") + 4) });
    });
  });
}

/** Runs `attack` and checks it answered within `ms` and grew the process's RSS by at most `maxGrowth`. */
async function bounded<T>(ms: number, maxGrowth: number, attack: () => Promise<T>): Promise<T> {
  const before = process.memoryUsage().rss;
  const started = performance.now();
  const result = await attack();
  expect(performance.now() - started).toBeLessThan(ms);
  expect(process.memoryUsage().rss - before).toBeLessThan(maxGrowth);
  return result;
}

/**
 * Registers (vitest `describe`/`it`) the hostile-input suite for one service: every REST route and every RPC of
 * `options.service` gets garbage, oversize messages on every listener, bad escapes, over-long URLs, wrong methods and
 * slow bodies, and must answer each with the contract's `{code, message}` (or gRPC status), in bounded time and memory,
 * never echoing what it was sent. A later service adds itself with one call of this function.
 */
export function describeHostileInput(name: string, options: HostileInputOptions): void {
  const routes = options.rest === false ? [] : restRoutes(options.service);
  const values = options.pathValues ?? {};
  const maxGrowth = options.maxRssGrowth ?? 64 * 1024 * 1024;
  const rpcPath = (m: DescMethod) => `/${options.service.typeName}/${m.name}`;
  const answerMs = 5_000;

  describe(`hostile input: ${name}`, () => {
    for (const method of options.service.methods) {
      const streaming = method.methodKind !== "unary";
      describe(`RPC ${method.name}`, () => {
        it("garbage protobuf on Connect is invalid_argument, not internal", async () => {
          const { connectUrl } = options.target();
          if (streaming) {
            const res = await fetch(connectUrl + rpcPath(method), { method: "POST", body: envelope(0, GARBAGE_PROTO), headers: { "content-type": "application/connect+proto" }, signal: AbortSignal.timeout(answerMs) });
            const frames = new Uint8Array(await res.arrayBuffer());
            const end = new TextDecoder().decode(frames.subarray(5));
            expect(JSON.parse(end).error.code).toBe("invalid_argument");
          } else {
            await expectErrorShape(await fetch(connectUrl + rpcPath(method), { method: "POST", body: GARBAGE_PROTO, headers: { "content-type": "application/proto" }, signal: AbortSignal.timeout(answerMs) }), 400, "invalid_argument");
          }
        });
        if (!streaming) {
          it("garbage JSON on Connect is invalid_argument", async () => {
            const { connectUrl } = options.target();
            await expectErrorShape(await fetch(connectUrl + rpcPath(method), { method: "POST", body: '{"a":', headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) }), 400, "invalid_argument");
          });
        }
        it("garbage protobuf on gRPC-Web is status 3 (invalid_argument)", async () => {
          const { connectUrl } = options.target();
          const res = await fetch(connectUrl + rpcPath(method), { method: "POST", body: envelope(0, GARBAGE_PROTO), headers: { "content-type": "application/grpc-web+proto" }, signal: AbortSignal.timeout(answerMs) });
          expect(grpcWebStatus(new Uint8Array(await res.arrayBuffer())).status).toBe("3");
        });
        it("garbage protobuf on gRPC is status 3 (invalid_argument)", async () => {
          const { grpcUrl } = options.target();
          expect((await grpcCall(grpcUrl, rpcPath(method), [envelope(0, GARBAGE_PROTO)], { timeoutMs: answerMs })).status).toBe("3");
        });
        it("an oversize message is refused on every RPC listener before it is buffered, naming the limit", async () => {
          const { connectUrl, grpcUrl } = options.target();
          const declared = options.limits.message + 1;
          // Only the 5-byte prefix claiming the size is sent: the limit must hold before the bytes arrive.
          const grpc = await bounded(answerMs, maxGrowth, () => grpcCall(grpcUrl, rpcPath(method), [envelope(0, new Uint8Array(0), declared)], { timeoutMs: answerMs }));
          expect(grpc.status).toBe("8");
          expect(grpc.message).toMatch(/limit of \d+ bytes \(/);
          const web = await bounded(answerMs, maxGrowth, async () => {
            const res = await fetch(connectUrl + rpcPath(method), { method: "POST", body: envelope(0, new Uint8Array(0), declared), headers: { "content-type": "application/grpc-web+proto" }, signal: AbortSignal.timeout(answerMs) });
            return grpcWebStatus(new Uint8Array(await res.arrayBuffer()));
          });
          expect(web.status).toBe("8");
          if (!streaming) {
            const big = new Uint8Array(declared);
            const body = await bounded(answerMs, maxGrowth, async () =>
              expectErrorShape(await fetch(connectUrl + rpcPath(method), { method: "POST", body: big, headers: { "content-type": "application/proto" }, signal: AbortSignal.timeout(answerMs) }), 429, "resource_exhausted"),
            );
            expect(body.message).toMatch(/limit of \d+ bytes \(/);
          }
        });
        // The deadline is one wrapper around every handler: one method per service proves it without a minute of trickling.
        if (method === options.service.methods.find((m) => m.methodKind === "unary")) {
          it("a gRPC request that trickles in is cut after the request timeout", async () => {
            const { grpcUrl } = options.target();
            const r = await grpcCall(grpcUrl, rpcPath(method), [envelope(0, new Uint8Array(64).fill(0x20))], { trickleMs: 100, timeoutMs: options.limits.requestTimeoutMs + answerMs });
            expect(r.status).toBe("4"); // deadline_exceeded
            expect(r.message).toMatch(/request-timeout/);
          });
        }
      });
    }

    for (const route of routes) {
      const path = fill(route.template, values);
      describe(`REST ${route.verb} ${route.template}`, () => {
        const variable = firstVariable(route.template);
        if (variable) {
          it("a malformed percent-escape is 400 invalid_argument without echoing the URL", async () => {
            const { restUrl } = options.target();
            const bad = fill(route.template, values, { name: variable, raw: "bad%E0%A4%Aescape" });
            const res = await fetch(restUrl + bad, { method: route.verb, body: route.hasBody ? "x" : undefined, signal: AbortSignal.timeout(answerMs) });
            await expectErrorShape(res, 400, "invalid_argument", "bad%E0");
          });
          it("an over-long path segment is 400 invalid_argument without echoing it", async () => {
            const { restUrl } = options.target();
            const long = "L".repeat(3000);
            const res = await fetch(restUrl + fill(route.template, values, { name: variable, raw: long }), { method: route.verb, body: route.hasBody ? "x" : undefined, signal: AbortSignal.timeout(answerMs) });
            await expectErrorShape(res, 400, "invalid_argument", "LLLLLLLLLL");
          });
          it("an over-long URL (past Node's header limit) is 400 invalid_argument without echoing it", async () => {
            const { restUrl } = options.target();
            const res = await fetch(restUrl + fill(route.template, values, { name: variable, raw: "L".repeat(20_000) }), { method: route.verb, body: route.hasBody ? "x" : undefined, signal: AbortSignal.timeout(answerMs) });
            await expectErrorShape(res, 400, "invalid_argument", "LLLLLLLLLL");
          });
        }
        it("a wrong method is 405 with Allow", async () => {
          const { restUrl } = options.target();
          const res = await fetch(restUrl + path, { method: "PATCH", body: "x", signal: AbortSignal.timeout(answerMs) });
          const allow = res.headers.get("allow") ?? "";
          await expectErrorShape(res, 405, "unimplemented");
          expect(allow.split(/,\s*/)).toContain(route.verb);
        });
        if (route.hasBody) {
          it("a body over the limit is 413 resource_exhausted naming the limit and its setting, without echoing it", async () => {
            const { restUrl } = options.target();
            const big = "B".repeat(options.limits.restBody + 1);
            const body = await bounded(answerMs, maxGrowth, async () =>
              expectErrorShape(await fetch(restUrl + path, { method: route.verb, body: big, headers: { "content-type": "text/plain" }, signal: AbortSignal.timeout(answerMs) }), 413, "resource_exhausted", "BBBBBBBBBB"),
            );
            expect(body.message).toMatch(/limit of \d+ bytes \(gov\.limits\.[a-z-]+\)/);
          });
          it("a gzip bomb is refused before it is inflated past the limit", async () => {
            const { gzipSync } = await import("node:zlib");
            const { restUrl } = options.target();
            const bomb = gzipSync(Buffer.alloc(64 * options.limits.restBody));
            const body = await bounded(answerMs, maxGrowth, async () =>
              expectErrorShape(await fetch(restUrl + path, { method: route.verb, body: bomb, headers: { "content-type": "text/plain", "content-encoding": "gzip" }, signal: AbortSignal.timeout(answerMs) }), 413, "resource_exhausted"),
            );
            expect(body.message).toMatch(/gov\.limits\./);
          });
          it("a body that trickles in is cut with 408 deadline_exceeded after the request timeout", async () => {
            const { restUrl } = options.target();
            const head = `${route.verb} ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n`;
            const r = await trickle(restUrl, head, 1000, 100, options.limits.requestTimeoutMs + answerMs);
            expect(r.status).toBe(408);
            expect(JSON.parse(r.body)).toMatchObject({ code: "deadline_exceeded", message: expect.stringMatching(/request-timeout/) });
          });
        }
      });
    }

    it.skipIf(options.rest === false)("headers that trickle in are cut with 408 deadline_exceeded after the request timeout", async () => {
      const { restUrl } = options.target();
      const { hostname, port } = new URL(restUrl);
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), hostname);
        let received = "";
        const timer = setTimeout(() => {
          socket.destroy();
          reject(new Error("the server still waited for the headers"));
        }, options.limits.requestTimeoutMs + answerMs);
        const drip = setInterval(() => socket.writable && socket.write("X-Slow: 1\r\n"), 100);
        socket.on("connect", () => socket.write("GET / HTTP/1.1\r\nHost: x\r\n"));
        socket.on("data", (d) => (received += d.toString("latin1")));
        socket.on("error", () => undefined);
        socket.on("close", () => {
          clearTimeout(timer);
          clearInterval(drip);
          resolve(received);
        });
      });
      expect(answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toMatchObject({ code: "deadline_exceeded" });
    });

    const watchers = options.nonReadingWatchers;
    if (!watchers && options.rest !== false) {
      it.todo("watchers that never read stay bounded in memory (give nonReadingWatchers once watch backpressure lands)");
    } else if (watchers) {
      it("watchers that never read are bounded in memory", async () => {
        const closers: (() => void)[] = [];
        try {
          await bounded(60_000, maxGrowth * 2, async () => {
            for (let i = 0; i < watchers.count; i++) closers.push(await watchers.open());
            for (let i = 0; i < watchers.updates; i++) await watchers.write(i);
          });
        } finally {
          closers.forEach((close) => close());
        }
      });
    }
  });
}
