import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import type { DescMessage } from "@bufbuild/protobuf";
import type { UniversalHandler, UniversalHandlerFn, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeToString, codeFromString } from "@connectrpc/connect/protocol-connect";
import { connectHttpStatus } from "./rest-status.js";
import { base64Decode, configureTextEncoding } from "@bufbuild/protobuf/wire";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { LONGEST_TIMER_MS, parseDurationBetween, type SettingDef } from "@gov/settings";
import { nextUnlessAborted } from "./abortable.js";
import { wrongMethodBody } from "./allowed-methods.js";
import { decodeHint } from "./decode-hints.js";
import { excerpt, parserMessage } from "./excerpt.js";
import { LIMIT_METADATA } from "./limits.js";
import { mapBody } from "./universal-body.js";

// Content is stored exactly as sent (contract §3): a leading UTF-8 BOM is part of a string field, not a marker to
// drop. protobuf-es decodes strings with a default TextDecoder, which strips it, so every process that imports the
// service kit decodes protobuf strings with ignoreBOM (keep it) instead.
const encoder = new TextEncoder();
const keepBom = new TextDecoder("utf-8", { ignoreBOM: true });
const keepBomStrict = new TextDecoder("utf-8", { ignoreBOM: true, fatal: true });
configureTextEncoding({
  encodeUtf8: (text) => encoder.encode(text),
  decodeUtf8: (bytes, strict) => (strict ? keepBomStrict : keepBom).decode(bytes),
  // A lone surrogate is the one thing a JS string can hold that UTF-8 cannot. Every string field set through reflection
  // (fromJson: every REST body) is checked, content of up to megabytes included: a scan, not a copy.
  checkUtf8: (text) => text.isWellFormed(),
});

/** `err` as the listener answers it: request-decoding failures `invalid_argument`, over-size ones naming the limit. */
export function correctedError(err: ConnectError, limit: MessageLimit | undefined, input: DescMessage): ConnectError {
  const fixed = correct(err.code, err.rawMessage, limit, input);
  return fixed ? new ConnectError(fixed.message, fixed.code, fixed.limit ? { [LIMIT_METADATA]: fixed.limit } : undefined) : err;
}

/** The message size limit of a listener and the setting that sets it, so that an over-size answer can name both. */
export interface MessageLimit {
  readMaxBytes: number;
  setting: string;
}

/**
 * Connect-ES answers request bytes it cannot decode with `internal` (gRPC status 13), which says "our bug" and makes
 * clients retry, and its size-limit message names its own option (`readMaxBytes`) rather than ours. Both are decided
 * before any interceptor runs, so they are corrected here, on the way out: the replacement for an error Connect-ES
 * wrote, or undefined to leave it alone. Anything a handler throws never looks like these (errorInterceptor hides
 * internal errors behind its own message).
 */
function correct(code: Code, message: string, limit: MessageLimit | undefined, input: DescMessage, encodingHeader = "grpc-encoding"): Fixed | undefined {
  const method = input.typeName;
  if (code === Code.Internal) {
    if (message.startsWith("parse binary: ")) {
      const why = message.slice("parse binary: ".length);
      return { code: Code.InvalidArgument, message: `the request is not a valid ${method} in protobuf binary (${why}): encode it with the method's request type` };
    }
    if (message.startsWith("received compressed envelope")) {
      // named in the protocol's own header: a Connect stream's is connect-content-encoding, not grpc-encoding
      return { code: Code.InvalidArgument, message: `a request message is flagged as compressed, but the request names no compression for it (${encodingHeader} is absent or identity): send it uncompressed or name the encoding in ${encodingHeader}` };
    }
  }
  // A JSON request Connect-ES could not decode: its message quotes the client's input (V8's slice of the text, the
  // unknown key whole), which must not come back as it was sent; or is protobuf-es's RangeError for a fraction of
  // more than 9 digits, which says nothing of what to fix (see decodeHint).
  if (code === Code.InvalidArgument && (message.includes("from JSON") || message.startsWith("Invalid count value"))) {
    const safe = decodeHint(parserMessage(message), input);
    return safe === message ? undefined : { code, message: safe };
  }
  // Connect-ES quotes a malformed deadline or an unknown compression whole, and a header may be up to 16 KiB (more on
  // h2c): it comes back as an excerpt, as everything else a client sent does.
  if (code === Code.InvalidArgument || code === Code.Unimplemented) {
    for (const quotes of QUOTED_HEADERS) {
      const quoted = quotes.exec(message);
      if (!quoted) continue;
      const safe = `${quoted[1]}${excerpt(quoted[2])}${quoted[3]}`;
      return safe === message ? undefined : { code, message: safe };
    }
  }
  if (code === Code.ResourceExhausted && message.includes("readMaxBytes")) {
    const size = /message size (\d+)/.exec(message)?.[1];
    const max = limit?.readMaxBytes ?? Number(/readMaxBytes (\d+)/.exec(message)?.[1]);
    const named = limit ? ` (${limit.setting})` : "";
    // marked as a size limit (LIMIT_METADATA, sent as a header or trailer): a REST gateway in front answers 413, not 429
    return { code: Code.ResourceExhausted, message: `the request message${size ? ` is ${size} bytes,` : " is"} over the limit of ${max} bytes${named}: send a smaller one`, limit: limit?.setting ?? "the listener's message limit" };
  }
  return undefined;
}

/**
 * Connect-ES's refusals that quote a request header whole: a malformed `connect-timeout-ms` or `grpc-timeout`; an
 * unknown `content-encoding`, `connect-content-encoding` or `grpc-encoding` (or a Connect GET's `compression`). Each
 * splits into the words before the value, the value, and the words after it.
 */
const QUOTED_HEADERS = [/^(protocol error: invalid (?:connect|grpc) timeout value: )([^]*)()$/, /^(unknown compression ")([^]*)(": supported encodings are [\w,.+-]*)$/];

export interface RequestGuards {
  /** The listener's message size limit (its readMaxBytes) and the setting behind it. */
  limit?: MessageLimit;
  /** A unary or server-streaming call whose one request message has not fully arrived by then is refused. */
  bodyTimeoutMs?: number;
}

/** Default for {@link RequestGuards.bodyTimeoutMs}, and the setting that changes it. */
export const REQUEST_TIMEOUT = { ms: 60_000, setting: "gov.limits.request-timeout" };

/** `gov.limits.request-timeout`, for the process runner to read and pass to every listener (REST, Connect, gRPC). */
export const requestTimeoutSetting = {
  name: REQUEST_TIMEOUT.setting,
  // 0 would switch the cut off (Node's own meaning), and a request could then trickle in for ever
  parse: parseDurationBetween(1000, LONGEST_TIMER_MS),
  default: REQUEST_TIMEOUT.ms,
  doc: "a request (headers and body) must have arrived this long after it started, or it is cut (408 / `deadline_exceeded`); slow uploads need more",
} as SettingDef<number>;

/**
 * Replaces each handler of `router` with one whose request-decoding failures are `invalid_argument`, whose over-size
 * answers name the limit, and whose request body must arrive within a deadline, in every protocol (Connect unary and
 * streaming, gRPC, gRPC-Web). Successful calls pass through untouched: only an error answer is read. Call it after
 * every route is registered and before the wire fixes (which must see the corrected trailers).
 */
export function fixRequestErrors(router: ConnectRouter, guards: RequestGuards = {}): void {
  router.handlers.forEach((handler, i) => {
    router.handlers[i] = withFixedErrors(handler, guards);
  });
}

function withFixedErrors(handler: UniversalHandler, guards: RequestGuards): UniversalHandler {
  const fix = (code: Code, message: string) => correct(code, message, guards.limit, handler.method.input);
  // Client- and bidi-streaming calls send for as long as they like; a call with one request message does not.
  const oneMessage = handler.method.methodKind === "unary" || handler.method.methodKind === "server_streaming";
  const bodyTimeoutMs = guards.bodyTimeoutMs ?? REQUEST_TIMEOUT.ms;
  const handle: UniversalHandlerFn = async (request) => {
    if (request.method === "GET") {
      const refused = badGetMessage(request.url, handler.method.input.typeName);
      if (refused) return refused;
    }
    const body = request.body;
    if (typeof body === "object" && body !== null && Symbol.asyncIterator in body) {
      let checked = body as AsyncIterable<Uint8Array>;
      if (oneMessage && bodyTimeoutMs > 0) checked = withDeadline(checked, bodyTimeoutMs);
      const framing = framingOf(request.header.get("content-type"));
      if (framing) checked = withCheckedFraming(checked, framing);
      if (checked !== body) request = { ...request, body: checked };
    }
    const res = await handler(request);
    if (!res.body) return res.status === 405 || res.status === 415 ? bareRefusal(res, request, handler) : res;
    const type = res.header?.get("content-type") ?? "";
    if (type.startsWith("application/grpc-web")) {
      const encoding = res.header?.get("grpc-encoding") ?? null;
      return { ...res, body: mapBody(res.body, (chunk) => fixGrpcWebTrailer(chunk, fix, encoding)) };
    }
    if (type.startsWith("application/grpc")) return { ...res, body: mapBody(res.body, undefined, () => fixGrpcTrailer(res.trailer, fix)) };
    if (type.startsWith("application/connect+")) {
      const encoding = res.header?.get("connect-content-encoding") ?? null;
      const fixConnect: Fix = (code, message) => correct(code, message, guards.limit, handler.method.input, "connect-content-encoding");
      return { ...res, body: mapBody(res.body, (chunk) => fixEndStream(chunk, fixConnect, encoding)) };
    }
    if (res.status >= 400 && type.startsWith("application/json")) return fixUnaryError(res, fix);
    return res;
  };
  const { protocolNames, service, requestPath, allowedMethods, supportedContentType } = handler;
  return Object.assign(handle, { protocolNames, service, method: handler.method, requestPath, allowedMethods, supportedContentType });
}

/** A corrected error; `limit`: it refuses a size over a limit (the setting), for LIMIT_METADATA. */
interface Fixed {
  code: Code;
  message: string;
  limit?: string;
}
type Fix = (code: Code, message: string) => Fixed | undefined;

/**
 * Connect-ES answers a wrong HTTP method (405) and a content type its protocols do not take (415) with the status
 * alone; every failure of ours carries `{code, message}` (contract §3), and a 405 names what is allowed.
 */
function bareRefusal(res: UniversalServerResponse, request: UniversalServerRequest, handler: UniversalHandler): UniversalServerResponse {
  const pathname = new URL(request.url, "http://x").pathname;
  const path = excerpt(pathname);
  const header = new Headers(res.header);
  let body: { code: string; message: string };
  if (res.status === 405) {
    header.set("allow", handler.allowedMethods.join(", "));
    body = wrongMethodBody(request.method, pathname, handler.allowedMethods);
  } else if (request.method === "GET") {
    body = { code: "invalid_argument", message: `a Connect GET of ${path} carries its request in the query: encoding=json (or proto with base64=1), message=<the request>, connect=v1` };
  } else {
    const type = excerpt(request.header.get("content-type") ?? "none");
    const others = enveloped(handler.protocolNames);
    body = {
      code: "invalid_argument",
      message: !handler.protocolNames.includes("connect")
        ? `content type ${type} is not one ${path} takes: ${others}`
        : handler.method.methodKind === "unary"
          ? `content type ${type} is not one ${path} takes: application/json or application/proto (Connect)${others ? `, ${others}` : ""}`
          : // a stream's Connect messages are enveloped: plain application/json is the unary form, which it does not take
            `content type ${type} is not one ${path} takes: it is a stream, whose Connect request is application/connect+json or application/connect+proto (an enveloped message, not plain JSON)${others ? `; or ${others}` : ""}`,
    };
  }
  return jsonError(res.status, body, header);
}

/**
 * The gRPC types the listener serves, as a refusal names them: the gateway's HTTP/1.1 port serves no gRPC (it needs
 * HTTP/2), so a client told to send application/grpc there would be refused again.
 */
function enveloped(protocols: readonly string[]): string {
  const types = [...(protocols.includes("grpc") ? ["application/grpc"] : []), ...(protocols.includes("grpc-web") ? ["application/grpc-web"] : [])].join(", ");
  return protocols.includes("grpc") ? types : `${types}${types ? " " : ""}(gRPC itself goes to the gRPC port, over HTTP/2)`;
}

/** A `{code, message}` answer written by this layer (Connect unary's error shape), on `header` when given. */
function jsonError(status: number, error: { code: string; message: string }, header = new Headers()): UniversalServerResponse {
  const bytes = encoder.encode(JSON.stringify(error));
  header.set("content-type", "application/json");
  header.set("content-length", String(bytes.byteLength));
  return { status, header, body: single(bytes) };
}

/**
 * A Connect GET whose `message` is flagged base64 (`base64=1`) but is not: Connect-ES's decoder throws a plain Error
 * there, which it answers as `internal` ("internal error", nothing logged) — the client's mistake reported as our bug.
 * Refused here as `invalid_argument` before Connect-ES reads it; undefined for everything else (decoded twice, but
 * only on this rare path).
 */
function badGetMessage(url: string, inputType: string): UniversalServerResponse | undefined {
  const query = url.indexOf("?");
  if (query < 0) return undefined;
  const params = new URLSearchParams(url.slice(query + 1));
  if (params.get("base64") !== "1") return undefined;
  try {
    base64Decode(params.get("message") ?? "");
    return undefined;
  } catch {
    return jsonError(400, { code: "invalid_argument", message: `the message query parameter is not base64 (base64=1): send the ${inputType} base64url-encoded, or JSON with encoding=json and no base64` });
  }
}

/**
 * Connect-ES compresses an error as any answer — a unary error body, a stream's end-stream frame — once it is 1 KiB or
 * more and the client accepts gzip or br, as every browser, fetch and Connect client does. The errors that quote the
 * client's input at length are just those: they are read inflated, so that the corrections apply to them too.
 * undefined: an encoding Connect-ES does not write, or bytes that do not inflate (then the answer is left alone).
 */
async function inflated(bytes: Uint8Array, encoding: string | null): Promise<Uint8Array | undefined> {
  const compression = encoding === null || encoding === "identity" ? undefined : [compressionGzip, compressionBrotli].find((c) => c.name === encoding);
  if (!compression) return encoding === null || encoding === "identity" ? bytes : undefined;
  return compression.decompress(bytes, 0xffffffff).catch(() => undefined);
}

/**
 * Connect unary: the error is the whole (small) JSON body, and the HTTP status follows its code (connectHttpStatus).
 * A corrected error is sent uncompressed: it is short once corrected.
 */
async function fixUnaryError(res: UniversalServerResponse, fix: Fix): Promise<UniversalServerResponse> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of res.body as AsyncIterable<Uint8Array>) chunks.push(chunk);
  const sent = Buffer.concat(chunks);
  const bytes = await inflated(sent, res.header?.get("content-encoding") ?? null);
  const error = bytes && (parseJson(bytes) as { code?: string; message?: string } | undefined);
  const code = error && typeof error.code === "string" ? (codeFromString(error.code) ?? Code.Unknown) : undefined;
  const fixed = code !== undefined ? fix(code, error!.message ?? "") : undefined;
  if (!fixed) return { ...res, status: code === Code.FailedPrecondition ? connectHttpStatus(code) : res.status, body: single(sent) };
  const body = encoder.encode(JSON.stringify({ ...error, code: codeToString(fixed.code), message: fixed.message }));
  res.header?.delete("content-encoding");
  res.header?.set("content-length", String(body.byteLength));
  if (fixed.limit) res.header?.set(LIMIT_METADATA, fixed.limit);
  return { ...res, status: connectHttpStatus(fixed.code), body: single(body) };
}

/**
 * Connect streaming: the error rides in the end-stream frame (flag 0x02; 0x03 when compressed with the stream's
 * `connect-content-encoding`: a corrected one is sent uncompressed, as each frame says for itself).
 */
function fixEndStream(chunk: Uint8Array, fix: Fix, encoding: string | null): Uint8Array | Promise<Uint8Array> {
  if (chunk.length < 5 || (chunk[0] !== 0x02 && chunk[0] !== 0x03) || frameLength(chunk) !== chunk.length - 5) return chunk;
  if (chunk[0] === 0x03) return inflated(chunk.subarray(5), encoding).then((json) => (json ? fixEndStreamJson(chunk, json, fix) : chunk));
  return fixEndStreamJson(chunk, chunk.subarray(5), fix);
}

/** The end-stream frame `chunk`, whose JSON is `json`, with its error corrected (or `chunk` as it was). */
function fixEndStreamJson(chunk: Uint8Array, json: Uint8Array, fix: Fix): Uint8Array {
  const end = parseJson(json) as { error?: { code?: string; message?: string } } | undefined;
  const error = end?.error;
  const fixed = error && typeof error.code === "string" ? fix(codeFromString(error.code) ?? Code.Unknown, error.message ?? "") : undefined;
  if (!fixed) return chunk;
  const metadata = fixed.limit ? { ...(end as { metadata?: object }).metadata, [LIMIT_METADATA]: [fixed.limit] } : (end as { metadata?: object }).metadata;
  return frame(0x02, encoder.encode(JSON.stringify({ ...end, ...(metadata ? { metadata } : {}), error: { ...error, code: codeToString(fixed.code), message: fixed.message } })));
}

/** gRPC: the status is in the HTTP trailers, which Connect-ES fills in once the body has ended. */
function fixGrpcTrailer(trailer: Headers | undefined, fix: Fix): void {
  const status = trailer?.get("grpc-status");
  if (!trailer || status == null || status === "0") return;
  const fixed = fix(Number(status) as Code, decodeMessage(trailer.get("grpc-message") ?? ""));
  if (!fixed) return;
  trailer.set("grpc-status", String(fixed.code));
  trailer.set("grpc-message", encodeURIComponent(fixed.message)); // as Connect-ES writes it; the wire fixes re-encode
  if (fixed.limit) trailer.set(LIMIT_METADATA, fixed.limit);
}

/**
 * gRPC-Web: the trailers are the body's last frame (flag 0x80, `name: value\r\n` lines). Connect-ES compresses that
 * frame too (0x81, with the answer's `grpc-encoding`) once it is 1 KiB or more and the client sent
 * `grpc-accept-encoding`: such a frame is sent inflated, so that this correction and the wire fixes after it
 * (grpc-message's encoding) apply to it as to any other, and clients that read trailers only uncompressed can read it.
 */
function fixGrpcWebTrailer(chunk: Uint8Array, fix: Fix, encoding: string | null): Uint8Array | Promise<Uint8Array> {
  if (chunk.length < 5 || (chunk[0] !== 0x80 && chunk[0] !== 0x81) || frameLength(chunk) !== chunk.length - 5) return chunk;
  if (chunk[0] === 0x81) return inflated(chunk.subarray(5), encoding).then((text) => (text ? fixGrpcWebTrailerText(frame(0x80, text), fix) : chunk));
  return fixGrpcWebTrailerText(chunk, fix);
}

/** The uncompressed gRPC-Web trailer frame `chunk`, its grpc-status and grpc-message corrected (or `chunk` as it was). */
function fixGrpcWebTrailerText(chunk: Uint8Array, fix: Fix): Uint8Array {
  const lines = new TextDecoder().decode(chunk.subarray(5)).split("\r\n");
  const headers = new Headers();
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon > 0) headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  const before = headers.get("grpc-message");
  fixGrpcTrailer(headers, fix);
  if (headers.get("grpc-message") === before) return chunk;
  let text = "";
  headers.forEach((value, name) => (text += `${name}: ${value}\r\n`));
  return frame(0x80, encoder.encode(text));
}

/** An enveloped protocol's framing, named, and the flags its clients may set (Connect: 1 compressed, 2 end of stream; gRPC: 1). */
interface Framing {
  name: string;
  maxFlags: number;
}

const CONNECT_STREAM = /^application\/connect\+/i;
const GRPC_WEB = /^application\/grpc-web/i;
const GRPC = /^application\/grpc/i;

/** The envelope framing of a request of this content type; undefined for Connect unary (not enveloped) and the rest. */
function framingOf(type: string | null): Framing | undefined {
  if (type === null) return undefined;
  if (CONNECT_STREAM.test(type)) return { name: "Connect enveloped framing (a Connect stream)", maxFlags: 2 };
  if (GRPC_WEB.test(type)) return { name: "gRPC-Web length-prefixed framing", maxFlags: 1 };
  if (GRPC.test(type)) return { name: "gRPC length-prefixed framing", maxFlags: 1 };
  return undefined;
}

/**
 * The request body of an enveloped protocol, failing with `invalid_argument` at the first envelope whose flags byte is
 * none a client sends. A body that is not enveloped at all (`hello world`, a bare JSON message) would otherwise have
 * its first bytes read as a length prefix and be refused as a message of some gigabytes over the size limit, which
 * sends its sender after the wrong problem. Only the flags are judged: an envelope with valid flags that declares a
 * length over the limit is still refused as over-size, naming the limit. Follows the envelope boundaries chunk by
 * chunk, copying nothing.
 */
function withCheckedFraming(body: AsyncIterable<Uint8Array>, framing: Framing): AsyncIterable<Uint8Array> {
  let offset = 0; // body bytes before the current chunk
  let skip = 0; // bytes of the current envelope's message still to come
  let header = 0; // bytes of the current envelope's 5-byte prefix seen
  let length = 0;
  return mapBody(body, (chunk) => {
    for (let i = 0; i < chunk.length; ) {
      if (skip > 0) {
        const n = Math.min(skip, chunk.length - i);
        skip -= n;
        i += n;
        continue;
      }
      const byte = chunk[i];
      if (header === 0) {
        if (byte > framing.maxFlags) {
          throw new ConnectError(
            `malformed envelope: the request body is not valid ${framing.name} (the envelope at byte ${offset + i} has flags 0x${byte.toString(16).padStart(2, "0")}, where ${framing.maxFlags === 2 ? "0, 1 or 2" : "0 or 1"} is expected): send each message enveloped, a flags byte and its length as 4 bytes big-endian before it`,
            Code.InvalidArgument,
          );
        }
        length = 0;
      } else length = length * 256 + byte;
      i++;
      if (++header === 5) {
        header = 0;
        skip = length;
      }
    }
    offset += chunk.length;
    return chunk;
  });
}

/**
 * The request body, failing with `deadline_exceeded` if it has not ended `ms` after the first read: a client that
 * trickles its request forever would otherwise hold the call (and its buffer) forever. One timer per call.
 */
function withDeadline(body: AsyncIterable<Uint8Array>, ms: number): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const it = body[Symbol.asyncIterator]();
      // Each read waits on this signal with a listener of its own (see nextUnlessAborted): racing every chunk against
      // one promise would keep every chunk of the body reachable until the call ends.
      const expired = new AbortController();
      let timer: NodeJS.Timeout | undefined;
      const stop = () => clearTimeout(timer);
      const start = () => {
        timer ??= setTimeout(() => {
          expired.abort(new ConnectError(`the request did not arrive within ${ms / 1000} s (${REQUEST_TIMEOUT.setting}): send it at once`, Code.DeadlineExceeded));
          void Promise.resolve(it.return?.()).catch(() => undefined); // stop reading from the slow client
        }, ms);
      };
      return {
        next: async () => {
          start();
          try {
            const r = await nextUnlessAborted(it, expired.signal, () => expired.signal.reason);
            if (r.done) stop();
            return r;
          } catch (err) {
            stop();
            throw err;
          }
        },
        return: (value?: unknown) => {
          stop();
          return it.return ? it.return(value) : Promise.resolve({ done: true as const, value });
        },
      };
    },
  };
}

function decodeMessage(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

function parseJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
}

const frameLength = (chunk: Uint8Array) => new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength).getUint32(1);

function frame(flags: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, payload.length);
  out.set(payload, 5);
  return out;
}

async function* single(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

