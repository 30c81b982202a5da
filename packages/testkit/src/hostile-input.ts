import { createHmac } from "node:crypto";
import { request as httpRequest } from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { getOption, ScalarType, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
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
    /** Largest JSON (or other non-raw) REST body the gateway takes: gov.limits.json-body as configured. */
    restBody: number;
    /** The setting behind `restBody`, which the REST over-limit answers must name (default: any gov.limits.* setting). */
    restBodySetting?: string;
    /** Largest raw-content REST body (a rule whose body is a string or bytes field): the module's own limit. Default restBody. */
    rawBody?: number;
    /** The setting behind `rawBody` (e.g. gov.limits.config-content). Default restBodySetting. */
    rawBodySetting?: string;
    /** Largest REST body of an upload (a rule that takes a file: its base64 in JSON, or a form). Default restBody. */
    uploadBody?: number;
    /** The setting behind `uploadBody`. Default restBodySetting. */
    uploadBodySetting?: string;
    /** Largest RPC message the Connect, gRPC-Web and gRPC listeners take (their readMaxBytes). */
    message: number;
    /** The setting behind `message`, which every listener's over-limit answer must name (e.g. gov.limits.zip-upload). */
    messageSetting?: string;
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
  /**
   * Security on: every route and RPC also gets missing, malformed, forged (`alg: none`, tampered, wrong key),
   * oversized and refresh-instead-of-access tokens (all 401 `unauthenticated`), and malformed bodies and paths with a
   * valid token (a 4xx in the contract's shape, never a 5xx).
   */
  auth?: {
    /** A valid access token allowed to do everything (the super user's). */
    token: () => string;
    /** A valid refresh token of the same login. */
    refreshToken: () => string;
    /** RPC names anyone may call without a token (login, refresh). */
    publicMethods?: string[];
  };
}

interface Route {
  method: DescMethod;
  verb: string;
  template: string;
  hasBody: boolean;
  /** The body is read as JSON (not raw content, not a form). */
  jsonBody: boolean;
  /** The body is a string or bytes field's raw content (a config's text), with its own size limit. */
  rawBody: boolean;
  /** The rule takes a file (an import): its body, JSON or a form, has the upload's limit. */
  upload: boolean;
  /** A neutral body: `[]` when the rule's body is a list field (role names), else `{}`. */
  emptyBody: string;
}

function restRoutes(service: DescService): Route[] {
  const routes: Route[] = [];
  for (const method of service.methods) {
    const rule = getOption(method, http);
    if (!rule || rule.pattern.case === undefined || rule.pattern.case === "custom") continue;
    const bodyField = method.input.fields.find((f) => f.name === rule.body);
    // a body read as JSON: the whole message (unless it uploads a file), or a map, list or message field
    const takesFile = method.input.fields.some((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES);
    const jsonBody = rule.body === "*" ? !takesFile : bodyField !== undefined && bodyField.fieldKind !== "scalar";
    const rawBody = bodyField?.fieldKind === "scalar" && (bodyField.scalar === ScalarType.STRING || bodyField.scalar === ScalarType.BYTES);
    routes.push({ method, verb: rule.pattern.case.toUpperCase(), template: rule.pattern.value, hasBody: rule.body !== "", jsonBody, rawBody, upload: rule.body === "*" && takesFile, emptyBody: bodyField?.fieldKind === "list" ? "[]" : "{}" });
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
function grpcCall(url: string, path: string, chunks: Uint8Array[], options: { trickleMs?: number; timeoutMs: number; headers?: Record<string, string> }): Promise<{ status: string | undefined; message: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc+proto", te: "trailers", ...options.headers });
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

/** A POST to `url` with `Expect: <expectation>` (fetch will not send the header); its status and body. */
function expecting(url: string, expectation: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: "POST", headers: { expect: expectation, "content-length": "2", "content-type": "application/json" } }, (res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end("{}");
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
  // With security on, every attack carries a valid token, so that it reaches what it attacks (limits, decoding).
  const tokenHeader = (): Record<string, string> => (options.auth ? { authorization: `Bearer ${options.auth.token()}` } : {});
  const send = (url: string, init: RequestInit) => fetch(url, { ...init, headers: { ...(init.headers as Record<string, string> | undefined), ...tokenHeader() } });
  const grpcWithToken = (url: string, path: string, chunks: Uint8Array[], o: { trickleMs?: number; timeoutMs: number }) => grpcCall(url, path, chunks, { ...o, headers: tokenHeader() });

  describe(`hostile input: ${name}`, () => {
    if (options.auth) tokenAttacks(options, routes, rpcPath, answerMs);
    it("an Expect header other than 100-continue is 417 with {code, message} on every HTTP/1.1 listener", async () => {
      const { restUrl, connectUrl } = options.target();
      const method = options.service.methods[0];
      for (const url of [...(options.rest === false ? [] : [restUrl + "/v1/namespaces"]), connectUrl + rpcPath(method)]) {
        const res = await expecting(url, "weird");
        expect([res.status, JSON.parse(res.body).code], url).toEqual([417, "invalid_argument"]);
      }
    });
    for (const method of options.service.methods) {
      const streaming = method.methodKind !== "unary";
      describe(`RPC ${method.name}`, () => {
        it("garbage protobuf on Connect is invalid_argument, not internal", async () => {
          const { connectUrl } = options.target();
          if (streaming) {
            const res = await send(connectUrl + rpcPath(method), { method: "POST", body: envelope(0, GARBAGE_PROTO), headers: { "content-type": "application/connect+proto" }, signal: AbortSignal.timeout(answerMs) });
            const frames = new Uint8Array(await res.arrayBuffer());
            const end = new TextDecoder().decode(frames.subarray(5));
            expect(JSON.parse(end).error.code).toBe("invalid_argument");
          } else {
            await expectErrorShape(await send(connectUrl + rpcPath(method), { method: "POST", body: GARBAGE_PROTO, headers: { "content-type": "application/proto" }, signal: AbortSignal.timeout(answerMs) }), 400, "invalid_argument");
          }
        });
        if (!streaming) {
          it("garbage JSON on Connect is invalid_argument", async () => {
            const { connectUrl } = options.target();
            await expectErrorShape(await send(connectUrl + rpcPath(method), { method: "POST", body: '{"a":', headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) }), 400, "invalid_argument");
          });
          it("a JSON key the message does not have is invalid_argument naming it, as on REST (never silently dropped)", async () => {
            const { connectUrl } = options.target();
            const res = await send(connectUrl + rpcPath(method), { method: "POST", body: '{"noSuchField":1}', headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) });
            expect(res.status).toBe(400);
            const body = JSON.parse(await res.text()) as { code: string; message: string };
            expect(body.code).toBe("invalid_argument");
            expect(body.message).toContain('"noSuchField" is unknown');
          });
          it("a JSON array, null, string or number for the request is invalid_argument saying to send an object", async () => {
            const { connectUrl } = options.target();
            for (const body of ["[]", "null", '"x"', "5"]) {
              const res = await send(connectUrl + rpcPath(method), { method: "POST", body, headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) });
              const answer = await expectErrorShape(res, 400, "invalid_argument");
              expect(answer.message, body).toContain(`send a JSON object with ${method.input.name}'s fields`);
            }
          });
          it("a huge unknown JSON key is invalid_argument without echoing it", async () => {
            const { connectUrl } = options.target();
            const key = "k".repeat(5_000); // under every listener's message limit: the echo is what is tested
            const body = await expectErrorShape(
              await send(connectUrl + rpcPath(method), { method: "POST", body: JSON.stringify({ [key]: 1 }), headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) }),
              400,
              "invalid_argument",
              "k".repeat(200),
            );
            expect(body.message.length).toBeLessThan(1000);
          });
          it('a JSON key "__proto__" (which a protobuf-es map would lose) is invalid_argument, never silently dropped', async () => {
            const { connectUrl } = options.target();
            const body = await expectErrorShape(await send(connectUrl + rpcPath(method), { method: "POST", body: '{"__proto__":"x"}', headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) }), 400, "invalid_argument");
            expect(body.message).toContain("__proto__");
          });
          it("invalid JSON is invalid_argument without quoting the body (it may hold a password)", async () => {
            const { connectUrl } = options.target();
            await expectErrorShape(await send(connectUrl + rpcPath(method), { method: "POST", body: '{"password":MySecretPassw0rd}', headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) }), 400, "invalid_argument", "MySecret");
          });
        }
        it("a wrong HTTP method is 405 with Allow, a content type no protocol takes 415, both as {code, message}", async () => {
          const { connectUrl } = options.target();
          const wrong = await send(connectUrl + rpcPath(method), { method: "PUT", body: "{}", headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) });
          const allow = wrong.headers.get("allow") ?? "";
          await expectErrorShape(wrong, 405, "unimplemented");
          expect(allow.split(/,\s*/)).toContain("POST");
          // text/plain reaches Connect-ES; the others are refused by Fastify's content-type parsers before it
          for (const contentType of ["text/plain", "application/xml", "application/x-www-form-urlencoded"]) {
            const type = await send(connectUrl + rpcPath(method), { method: "POST", body: "{}", headers: { "content-type": contentType }, signal: AbortSignal.timeout(answerMs) });
            await expectErrorShape(type, 415, "invalid_argument");
          }
        });
        if (!streaming && method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS) {
          it("a Connect GET whose base64 message is not base64 is invalid_argument, not internal", async () => {
            const { connectUrl } = options.target();
            for (const encoding of ["proto", "json"]) {
              const url = `${connectUrl}${rpcPath(method)}?connect=v1&encoding=${encoding}&base64=1&message=${encodeURIComponent("!!!")}`;
              await expectErrorShape(await send(url, { signal: AbortSignal.timeout(answerMs) }), 400, "invalid_argument");
            }
          });
        }
        it("garbage protobuf on gRPC-Web is status 3 (invalid_argument)", async () => {
          const { connectUrl } = options.target();
          const res = await send(connectUrl + rpcPath(method), { method: "POST", body: envelope(0, GARBAGE_PROTO), headers: { "content-type": "application/grpc-web+proto" }, signal: AbortSignal.timeout(answerMs) });
          expect(grpcWebStatus(new Uint8Array(await res.arrayBuffer())).status).toBe("3");
        });
        it("garbage protobuf on gRPC is status 3 (invalid_argument)", async () => {
          const { grpcUrl } = options.target();
          expect((await grpcWithToken(grpcUrl, rpcPath(method), [envelope(0, GARBAGE_PROTO)], { timeoutMs: answerMs })).status).toBe("3");
        });
        it("a body that is not enveloped (`hello world`) is a malformed envelope (invalid_argument), not an over-size message", async () => {
          const { connectUrl, grpcUrl } = options.target();
          // its first bytes read as an envelope prefix: flags 0x68, length 0x656c6c6f (~1.7 GB, over any limit)
          const garbage = new TextEncoder().encode("hello world");
          const malformed = /malformed envelope: the request body is not valid .*framing/;
          if (streaming) {
            for (const type of ["application/connect+json", "application/connect+proto"]) {
              const res = await send(connectUrl + rpcPath(method), { method: "POST", body: garbage, headers: { "content-type": type }, signal: AbortSignal.timeout(answerMs) });
              const frames = new Uint8Array(await res.arrayBuffer());
              const { error } = JSON.parse(new TextDecoder().decode(frames.subarray(5))) as { error: { code: string; message: string } };
              expect([error.code, error.message], type).toEqual(["invalid_argument", expect.stringMatching(malformed)]);
              expect(error.message).toContain("Connect enveloped framing");
            }
          }
          const res = await send(connectUrl + rpcPath(method), { method: "POST", body: garbage, headers: { "content-type": "application/grpc-web+proto" }, signal: AbortSignal.timeout(answerMs) });
          const web = grpcWebStatus(new Uint8Array(await res.arrayBuffer()));
          expect([web.status, decodeURIComponent(web.message)]).toEqual(["3", expect.stringMatching(malformed)]);
          const grpc = await grpcWithToken(grpcUrl, rpcPath(method), [garbage], { timeoutMs: answerMs });
          expect([grpc.status, grpc.message]).toEqual(["3", expect.stringMatching(malformed)]);
        });
        it("an oversize message is refused on every RPC listener before it is buffered, naming the limit", async () => {
          const { connectUrl, grpcUrl } = options.target();
          const declared = options.limits.message + 1;
          // Only the 5-byte prefix claiming the size is sent: the limit must hold before the bytes arrive.
          const grpc = await bounded(answerMs, maxGrowth, () => grpcWithToken(grpcUrl, rpcPath(method), [envelope(0, new Uint8Array(0), declared)], { timeoutMs: answerMs }));
          expect(grpc.status).toBe("8");
          expect(grpc.message).toMatch(/limit of \d+ bytes \(/);
          if (options.limits.messageSetting) expect(grpc.message).toContain(options.limits.messageSetting);
          const web = await bounded(answerMs, maxGrowth, async () => {
            const res = await send(connectUrl + rpcPath(method), { method: "POST", body: envelope(0, new Uint8Array(0), declared), headers: { "content-type": "application/grpc-web+proto" }, signal: AbortSignal.timeout(answerMs) });
            return grpcWebStatus(new Uint8Array(await res.arrayBuffer()));
          });
          expect(web.status).toBe("8");
          if (!streaming) {
            const big = new Uint8Array(declared);
            const body = await bounded(answerMs, maxGrowth, async () =>
              expectErrorShape(await send(connectUrl + rpcPath(method), { method: "POST", body: big, headers: { "content-type": "application/proto" }, signal: AbortSignal.timeout(answerMs) }), 429, "resource_exhausted"),
            );
            expect(body.message).toMatch(/limit of \d+ bytes \(/);
            if (options.limits.messageSetting) expect(body.message).toContain(options.limits.messageSetting);
          }
        });
        // The deadline is one wrapper around every handler: one method per service proves it without a minute of trickling.
        if (method === options.service.methods.find((m) => m.methodKind === "unary")) {
          it("a gRPC request that trickles in is cut after the request timeout", async () => {
            const { grpcUrl } = options.target();
            const r = await grpcWithToken(grpcUrl, rpcPath(method), [envelope(0, new Uint8Array(64).fill(0x20))], { trickleMs: 100, timeoutMs: options.limits.requestTimeoutMs + answerMs });
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
            const bad = fill(route.template, values, { name: variable, raw: "bad%E0%A4%ZZescape" /* %ZZ is no escape at all (%Ae would be: é-like bytes, valid) */ });
            const res = await send(restUrl + bad, { method: route.verb, body: route.hasBody ? "x" : undefined, signal: AbortSignal.timeout(answerMs) });
            await expectErrorShape(res, 400, "invalid_argument", "bad%E0");
          });
          it("an over-long path segment is 400 invalid_argument without echoing it", async () => {
            const { restUrl } = options.target();
            const long = "L".repeat(3000);
            const res = await send(restUrl + fill(route.template, values, { name: variable, raw: long }), { method: route.verb, body: route.hasBody ? "x" : undefined, signal: AbortSignal.timeout(answerMs) });
            await expectErrorShape(res, 400, "invalid_argument", "LLLLLLLLLL");
          });
          it("an over-long URL (past Node's header limit) is 400 invalid_argument without echoing it", async () => {
            const { restUrl } = options.target();
            const res = await send(restUrl + fill(route.template, values, { name: variable, raw: "L".repeat(20_000) }), { method: route.verb, body: route.hasBody ? "x" : undefined, signal: AbortSignal.timeout(answerMs) });
            await expectErrorShape(res, 400, "invalid_argument", "LLLLLLLLLL");
            // the same limit, reached by a header: the message names both, so a client with a short URL knows what to cut
            const header = await send(restUrl + fill(route.template, values), { method: route.verb, headers: { "x-padding": "L".repeat(20_000) }, body: route.hasBody ? "x" : undefined, signal: AbortSignal.timeout(answerMs) });
            expect((await expectErrorShape(header, 400, "invalid_argument", "LLLLLLLLLL")).message).toMatch(/request line and headers are over 16 KiB.*shorter headers/);
          });
        }
        it("a wrong method is 405 with Allow", async () => {
          const { restUrl } = options.target();
          const served = new Set(routes.filter((r) => r.template === route.template).map((r) => r.verb));
          const wrong = ["PATCH", "PUT", "POST", "DELETE"].find((v) => !served.has(v))!;
          const res = await send(restUrl + path, { method: wrong, body: "x", signal: AbortSignal.timeout(answerMs) });
          const allow = res.headers.get("allow") ?? "";
          await expectErrorShape(res, 405, "unimplemented");
          expect(allow.split(/,\s*/)).toContain(route.verb);
        });
        if (route.jsonBody) {
          it("a JSON body with a huge unknown key, or invalid JSON, is 400 invalid_argument without echoing either", async () => {
            const { restUrl } = options.target();
            const key = "k".repeat(5_000); // under every listener's message limit: the echo is what is tested
            const huge = await expectErrorShape(
              await send(restUrl + path, { method: route.verb, body: JSON.stringify({ [key]: 1 }), headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) }),
              400,
              "invalid_argument",
              "k".repeat(200),
            );
            expect(huge.message.length).toBeLessThan(1000);
            await expectErrorShape(await send(restUrl + path, { method: route.verb, body: '{"password":MySecretPassw0rd}', headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) }), 400, "invalid_argument", "MySecret");
            const lost = await expectErrorShape(await send(restUrl + path, { method: route.verb, body: '{"__proto__":"x"}', headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) }), 400, "invalid_argument");
            expect(lost.message).toContain("__proto__"); // a map would lose that key: refused, never silently dropped
          });
        }
        if (route.hasBody) {
          // the limit of this route's body: raw content has its module's own, an upload the upload's, every other body the JSON one
          const l = options.limits;
          const limit = route.rawBody ? (l.rawBody ?? l.restBody) : route.upload ? (l.uploadBody ?? l.restBody) : l.restBody;
          const setting = route.rawBody ? (l.rawBodySetting ?? l.restBodySetting) : route.upload ? (l.uploadBodySetting ?? l.restBodySetting) : l.restBodySetting;
          it("a body over the limit is 413 resource_exhausted naming the limit and its setting, without echoing it", async () => {
            const { restUrl } = options.target();
            const big = "B".repeat(limit + 1);
            const body = await bounded(answerMs, maxGrowth, async () =>
              expectErrorShape(await send(restUrl + path, { method: route.verb, body: big, headers: { "content-type": "text/plain" }, signal: AbortSignal.timeout(answerMs) }), 413, "resource_exhausted", "BBBBBBBBBB"),
            );
            expect(body.message).toMatch(/limit of \d+ bytes \(gov\.limits\.[a-z-]+/);
            expect(body.message).toContain(`limit of ${limit} bytes`);
            if (setting) expect(body.message).toContain(`(${setting})`);
          });
          it("a gzip bomb is refused before it is inflated past the limit", async () => {
            const { gzipSync } = await import("node:zlib");
            const { restUrl } = options.target();
            const bomb = gzipSync(Buffer.alloc(64 * limit));
            const body = await bounded(answerMs, maxGrowth, async () =>
              expectErrorShape(await send(restUrl + path, { method: route.verb, body: bomb, headers: { "content-type": "text/plain", "content-encoding": "gzip" }, signal: AbortSignal.timeout(answerMs) }), 413, "resource_exhausted"),
            );
            expect(body.message).toMatch(/gov\.limits\./);
            expect(body.message).toContain(`limit of ${limit} bytes`);
            if (setting) expect(body.message).toContain(`(${setting})`);
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

const b64url = (s: string | Buffer) => Buffer.from(s).toString("base64url");

/** Authorization header values that must all be refused with 401, built from a valid token (forgeries of it). */
function badAuthorizations(token: string, refreshToken: string): { name: string; header?: string }[] {
  const [head, payload, signature] = token.split(".");
  const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Record<string, unknown>;
  const escalated = b64url(JSON.stringify({ ...claims, sub: "someone-else" }));
  const foreignKey = createHmac("sha256", "not-the-server-key-not-the-server-key").update(`${head}.${payload}`).digest("base64url");
  return [
    { name: "no token" },
    { name: "an empty Bearer", header: "Bearer " },
    { name: "another scheme", header: `Basic ${b64url("root:root")}` },
    { name: "garbage", header: "Bearer not.a.jwt" },
    { name: "alg none", header: `Bearer ${b64url(JSON.stringify({ alg: "none", typ: "JWT" }))}.${payload}.` },
    { name: "alg HS512 header", header: `Bearer ${b64url(JSON.stringify({ alg: "HS512", typ: "JWT" }))}.${payload}.${signature}` },
    { name: "a tampered payload", header: `Bearer ${head}.${escalated}.${signature}` },
    { name: "another key's signature", header: `Bearer ${head}.${payload}.${foreignKey}` },
    { name: "a refresh token", header: `Bearer ${refreshToken}` },
    { name: "an oversized token", header: `Bearer ${"T".repeat(12_000)}` },
  ];
}

/**
 * Only the token attacks of {@link describeHostileInput} (`options.auth` required), for a service whose other hostile
 * input is already covered by its own suite with security off.
 */
export function describeHostileTokens(name: string, options: HostileInputOptions & { auth: NonNullable<HostileInputOptions["auth"]> }): void {
  describe(`hostile tokens: ${name}`, () => tokenAttacks(options, options.rest === false ? [] : restRoutes(options.service), (m) => `/${options.service.typeName}/${m.name}`, 5_000));
}

function tokenAttacks(options: HostileInputOptions, routes: Route[], rpcPath: (m: DescMethod) => string, answerMs: number): void {
  const auth = options.auth!;
  const isPublic = (m: DescMethod) => auth.publicMethods?.includes(m.name) === true;
  const values = options.pathValues ?? {};
  const headersOf = (header: string | undefined): Record<string, string> => (header === undefined ? {} : { authorization: header });
  describe("tokens", () => {
    for (const route of routes.filter((r) => !isPublic(r.method))) {
      it(`REST ${route.verb} ${route.template}: missing, malformed and forged tokens are 401 unauthenticated`, async () => {
        const { restUrl } = options.target();
        for (const bad of badAuthorizations(auth.token(), auth.refreshToken())) {
          const res = await fetch(restUrl + fill(route.template, values), { method: route.verb, body: route.hasBody ? route.emptyBody : undefined, headers: { ...headersOf(bad.header), "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) });
          const body = await expectErrorShape(res, 401, "unauthenticated", "TTTTTTTTTT").catch((err: Error) => {
            throw new Error(`${bad.name}: ${err.message}`);
          });
          expect(body.message, bad.name).not.toMatch(/internal/);
        }
      });
    }
    for (const route of routes) {
      it(`REST ${route.verb} ${route.template}: malformed bodies and paths with a valid token are 4xx, never 5xx`, async () => {
        const { restUrl } = options.target();
        const variable = firstVariable(route.template);
        const paths = [fill(route.template, values), ...(variable ? ["%00", "%7B", "..", "%2F%2F", "x".repeat(600)].map((raw) => fill(route.template, values, { name: variable, raw })) : [])];
        const bodies = route.hasBody ? ['{"a":', "[1,2", '{"password":5}', '{"resourceActionBind":[{"action":7}]}', "null", '"\\ud800"', "\u0000"] : [undefined];
        for (const path of paths) {
          for (const body of bodies) {
            const res = await fetch(restUrl + path, { method: route.verb, body, headers: { authorization: `Bearer ${auth.token()}`, "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) });
            if (res.status < 400) {
              await res.body?.cancel(); // e.g. a watch that started: it never ends by itself
              continue;
            }
            const text = await res.text();
            expect(res.status, `${route.verb} ${path} ${body}: ${text.slice(0, 200)}`).toBeLessThan(500);
            if (res.status >= 400) {
              const parsed = JSON.parse(text) as Record<string, unknown>;
              expect(Object.keys(parsed).sort(), text).toEqual(["code", "message"]);
            }
          }
        }
      });
    }
    for (const method of options.service.methods.filter((m) => !isPublic(m))) {
      it(`RPC ${method.name}: missing, malformed and forged tokens are unauthenticated on Connect and gRPC`, async () => {
        const { connectUrl, grpcUrl } = options.target();
        for (const bad of badAuthorizations(auth.token(), auth.refreshToken())) {
          if (method.methodKind === "unary") {
            const res = await fetch(connectUrl + rpcPath(method), { method: "POST", body: "{}", headers: { ...headersOf(bad.header), "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) });
            await expectErrorShape(res, 401, "unauthenticated", "TTTTTTTTTT").catch((err: Error) => {
              throw new Error(`${bad.name}: ${err.message}`);
            });
          }
          const grpc = await grpcCall(grpcUrl, rpcPath(method), [envelope(0, new Uint8Array(0))], { timeoutMs: answerMs, headers: headersOf(bad.header) });
          expect([bad.name, grpc.status]).toEqual([bad.name, "16"]);
        }
      });
    }
    for (const method of options.service.methods.filter((m) => m.methodKind === "unary" && m.input.fields.length > 0)) {
      it(`RPC ${method.name}: a valid token with wrongly typed JSON is invalid_argument`, async () => {
        const { connectUrl } = options.target();
        const wrong = Object.fromEntries(method.input.fields.map((f) => [f.jsonName, { nested: [1] }]));
        const res = await fetch(connectUrl + rpcPath(method), { method: "POST", body: JSON.stringify(wrong), headers: { authorization: `Bearer ${auth.token()}`, "content-type": "application/json" }, signal: AbortSignal.timeout(answerMs) });
        await expectErrorShape(res, 400, "invalid_argument");
      });
    }
  });
}
