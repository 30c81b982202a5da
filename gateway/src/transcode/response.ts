import { promisify } from "node:util";
import { brotliCompress, constants as zlibConstants, gzip } from "node:zlib";
import { ScalarType, toJson, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { jsonArrayInTurns, jsonTexts, LARGE_LIST, prepareLargeLists } from "@gov/service-kit";
import negotiate from "@fastify/accept-negotiator";
import type { FastifyReply } from "fastify";
import { logFailure, toRestError } from "../errors.js";
import type { RestRoute } from "./rest-routes.js";

const JSON_OPTIONS = { alwaysEmitImplicit: true } as const;

// JSON text of message-typed response fields (and of each message of a repeated one), by message identity: services
// hand out the same immutable message for an unchanged record (e.g. a cached config, a registry instance), so a hot
// read is serialized once, not on every request. A watch's first message holds every instance of the service: 50
// watchers of a 6,000-instance service each serializing all of them kept the event loop busy for 250–400 ms; the
// instances' texts are now made once (a few milliseconds at a time, see prepareAnswer) and joined.
const texts = jsonTexts(JSON_OPTIONS);
const messageJson = texts.message;
const listJson = texts.list;
export const wholeMessageJson = texts.whole;

/**
 * Makes the JSON texts of `msg`'s long lists of messages a few milliseconds at a time (see large-lists.ts in the
 * service kit), so that serializing it afterwards is a join; undefined when it has none.
 */
export const prepareAnswer = (desc: DescMessage, msg: Message): Promise<void> | undefined => prepareLargeLists(desc, msg, messageJson);

/** A bool or string field, or a list of either: protobuf JSON writes those values as JSON.stringify does. */
const isPlainJson = (field: DescField) =>
  (field.fieldKind === "scalar" || (field.fieldKind === "list" && field.listKind === "scalar")) && (field.scalar === ScalarType.BOOL || field.scalar === ScalarType.STRING);

/**
 * The body of a unary answer that holds a large list, made a few milliseconds at a time; undefined for every other
 * answer (then responseBody), which pays a field check and no promise. A list of messages is joined and encoded to
 * UTF-8 in turns (jsonTexts' listInTurns / wholeInTurns: a 40,000-instance list took ~16 ms to join and ~12 ms more to
 * encode, in one piece); a list of strings is written in slices (a namespace's 100,000 config ids, 3.7 MB of JSON:
 * 12–49 ms of JSON.stringify in one piece).
 */
function largeResponseBody(route: RestRoute, msg: Message): Promise<string | Buffer> | undefined {
  const field = route.responseField;
  if (!field) return texts.wholeInTurns(route.method.output, msg);
  if (field.fieldKind !== "list") return undefined;
  if (field.listKind === "message") return texts.listInTurns(field.message, (msg as unknown as Record<string, Message[]>)[field.localName]);
  if (!isPlainJson(field)) return undefined;
  const values = (msg as unknown as Record<string, (string | boolean)[] | undefined>)[field.localName];
  if (values === undefined || values.length < LARGE_LIST) return undefined;
  return Promise.resolve(jsonArrayInTurns(values));
}

/** The JSON text the REST API answers: the whole message, or just the rule's response field (`true`, `["a.yaml"]`). */
export function responseBody(route: RestRoute, msg: Message): string {
  const field = route.responseField;
  if (!field) return wholeMessageJson(route.method.output, msg);
  const value = (msg as unknown as Record<string, unknown>)[field.localName];
  if (field.fieldKind === "message") return value === undefined ? "null" : messageJson(field.message, value as Message);
  if (field.fieldKind === "list" && field.listKind === "message") return listJson(field.message, value as Message[]);
  // The answers of most writes (`true`) and of the id lists: their JSON is the value's own, with no toJson of the
  // message (~0.5 µs per answer, measured alone). Other scalars (int64 as a string, bytes, enums) take the general way.
  if (isPlainJson(field)) return value === undefined ? "null" : JSON.stringify(value);
  const json = toJson(route.method.output, msg, JSON_OPTIONS) as Record<string, unknown>;
  return JSON.stringify(json[field.jsonName] ?? null);
}

/** A response field of type google.api.HttpBody is sent as raw bytes (the ZIP export). */
export function isHttpBody(field: DescField | undefined): boolean {
  return field?.fieldKind === "message" && field.message.typeName === "google.api.HttpBody";
}

interface HttpBodyChunk {
  contentType: string;
  data: Uint8Array;
}

/**
 * `attachment` with an ASCII fallback name (header values must be Latin-1; namespaces need not be) and the exact
 * name in RFC 5987 form for clients that read it. A path separator in the name (a namespace may hold `/`) is `_` in
 * both: clients keep only what follows the last one (`curl -OJ` saved `{dev}/x_configs_….zip` as `x_configs_….zip`).
 */
function contentDisposition(fileName: string): string {
  const name = fileName.replace(/[/\\]/g, "_");
  const ascii = name.replace(/[^\x20-\x7e]|"/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** Streams raw HttpBody chunks; headers come from the first message (content type, `fileName` → attachment). */
export async function sendHttpBodyStream(route: RestRoute, reply: FastifyReply, stream: AsyncIterable<Message>): Promise<void> {
  const it = stream[Symbol.asyncIterator]();
  const first = await it.next(); // errors before the first chunk still become a proper JSON error response
  const field = route.responseField!;
  const pick = (m: Message) => (m as unknown as Record<string, HttpBodyChunk | undefined>)[field.localName];
  const head = first.done ? undefined : first.value;
  const fileName = head ? (head as unknown as Record<string, unknown>).fileName : undefined;
  reply.raw.statusCode = 200;
  reply.raw.setHeader("Content-Type", (head && pick(head)?.contentType) || "application/octet-stream");
  if (typeof fileName === "string" && fileName) {
    reply.raw.setHeader("Content-Disposition", contentDisposition(fileName));
  }
  reply.hijack();
  const res = reply.raw;
  if (reply.request.method === "HEAD") return endAndRelease(res, it);
  try {
    if (head) res.write(pick(head)?.data ?? new Uint8Array());
    for (let next = await it.next(); !next.done; next = await it.next()) {
      const data = pick(next.value)?.data;
      if (data?.length && !(await writeOrWait(res, data))) {
        // the client went away: stop producing (a destroyed response never emits "drain")
        await it.return?.(undefined);
        return;
      }
    }
    res.end();
  } catch (err) {
    logFailure(reply.request, err, toRestError(err), "stream failed after the response started");
    res.destroy(err as Error); // the client sees a truncated transfer, never a corrupt "complete" archive
  }
}

/** How REST responses are sent (gateway settings). */
export interface ResponseOptions {
  /** JSON bodies of at least this many characters are compressed (br or gzip) when the client accepts it. */
  compressMinBytes: number;
  /** `gov.sse.heartbeat`: an SSE comment line this often keeps proxies and clients from timing out an idle watch. */
  heartbeatMs: number;
  /** The `retry:` an SSE stream advises: how long a client waits before reconnecting. */
  retryMs: number;
  /**
   * How long a stream (a watch, an export) may take to start — its first message, or a remote service's response
   * headers — before the client is answered 503: a service that accepts the connection but does not answer (stopped,
   * overloaded) must not hold the client with no status at all. As long as a remote unary call's default deadline.
   */
  streamStartMs: number;
}

export const DEFAULT_RESPONSE_OPTIONS: ResponseOptions = { compressMinBytes: 1024, heartbeatMs: 15_000, retryMs: 3_000, streamStartMs: 10_000 };

/** Ends the response and stops the stream (HEAD answers like GET without a body; a client that left needs no more). */
async function endAndRelease(res: FastifyReply["raw"], it: AsyncIterator<unknown>): Promise<void> {
  res.end();
  try {
    await it.return?.();
  } catch {
    // the stream is abandoned; how it ends is of no interest to a HEAD request
  }
}

type TagReader = (msg: Message) => string | undefined;

// An entity tag may hold visible ASCII except '"'; anything else is not sent as a tag.
const TAG_CHARS = /^[\x21\x23-\x7e]+$/;
const tagReaders = new WeakMap<DescMessage, TagReader>();

const isHashField = (f: DescField) => f.name === "hash" && f.fieldKind === "scalar" && f.scalar === ScalarType.STRING;
const tagOf = (value: unknown): string | undefined => (typeof value === "string" && TAG_CHARS.test(value) ? value : undefined);

/**
 * What names the content of a message: its string field `hash`, or that of one of its message fields (a watch event's
 * `config.hash`). The one rule behind a GET's `ETag` and an SSE event's `id:`, for any service whose messages carry a
 * content hash; messages without one get neither.
 */
export function stateTagReader(desc: DescMessage): TagReader {
  let reader = tagReaders.get(desc);
  if (reader === undefined) {
    reader = buildTagReader(desc);
    tagReaders.set(desc, reader);
  }
  return reader;
}

/** The reader of messages that carry no content hash anywhere. */
const NO_TAG: TagReader = () => undefined;

function buildTagReader(desc: DescMessage): TagReader {
  const own = desc.fields.find(isHashField);
  if (own) return (m) => tagOf((m as unknown as Record<string, unknown>)[own.localName]);
  for (const f of desc.fields) {
    const inner = f.fieldKind === "message" ? f.message.fields.find(isHashField) : undefined;
    if (inner) {
      return (m) => {
        const value = (m as unknown as Record<string, Record<string, unknown> | undefined>)[f.localName];
        return value === undefined ? undefined : tagOf(value[inner.localName]);
      };
    }
  }
  return NO_TAG;
}

/** The message a unary REST route answers with (the rule's response field, or the whole output), if a message. */
function respondedMessage(route: RestRoute, msg: Message): Message | undefined {
  const field = route.responseField;
  if (!field) return msg;
  if (field.fieldKind !== "message") return undefined;
  return (msg as unknown as Record<string, Message | undefined>)[field.localName];
}

/** The ETag of a GET route's answers (`"<hash>"`), or undefined for routes whose answers carry no content hash. */
export function entityTagOf(route: RestRoute): (msg: Message) => string | undefined {
  if (route.httpMethod !== "GET") return () => undefined;
  const desc = route.responseField ? (route.responseField.fieldKind === "message" ? route.responseField.message : undefined) : route.method.output;
  if (desc === undefined) return () => undefined;
  const read = stateTagReader(desc);
  return (msg) => {
    const answered = respondedMessage(route, msg);
    const tag = answered && read(answered);
    return tag === undefined ? undefined : `"${tag}"`;
  };
}

/** `If-None-Match` (a list of tags, weak or strong, or `*`) names `etag`: weak comparison, as RFC 9110 §13.1.2 says. */
export function ifNoneMatchHits(header: string, etag: string): boolean {
  for (const part of header.split(",")) {
    const tag = part.trim();
    if (tag === "*" || tag === etag || (tag.startsWith("W/") && tag.slice(2) === etag)) return true;
  }
  return false;
}

const brotli = promisify(brotliCompress);
const gzipAsync = promisify(gzip);
const ENCODINGS = ["br", "gzip"];
// Quality 4: about gzip's speed with a smaller result; 11 (the default) is many times slower for a few percent.
const BROTLI_OPTIONS = { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 4 } };

// Compressed bodies by the answered message (or another object standing for an unchanging body) and encoding: services
// hand out the same immutable message for an unchanged record, so a large hot config is compressed once, like its JSON
// text.
const compressedBodies = new WeakMap<object, Map<string, Buffer>>();

async function compressed(body: string | Buffer, encoding: string, key: object | undefined): Promise<Buffer> {
  const cached = key && compressedBodies.get(key)?.get(encoding);
  if (cached) return cached;
  const out = encoding === "br" ? await brotli(body, BROTLI_OPTIONS) : await gzipAsync(body);
  if (key) {
    const byEncoding = compressedBodies.get(key) ?? new Map<string, Buffer>();
    byEncoding.set(encoding, out);
    compressedBodies.set(key, byEncoding);
  }
  return out;
}

/**
 * A unary answer as JSON text: with its `ETag` (and a 304 when `If-None-Match` names it), compressed when large and
 * the client accepts br or gzip. Small bodies, the common case, pay one length check and no promise.
 */
export function sendUnaryResponse(
  route: RestRoute,
  reply: FastifyReply,
  msg: Message,
  etagOf: (msg: Message) => string | undefined,
  options: ResponseOptions,
): FastifyReply | Promise<FastifyReply> {
  const etag = etagOf(msg);
  if (etag !== undefined) {
    // no-cache: a cache may keep the answer but must ask again (cheaply, with If-None-Match) before using it.
    // Lower-case names, as Fastify stores (and sends) them: it then has no new string to make per request.
    reply.header("etag", etag).header("cache-control", "no-cache");
    const ifNoneMatch = reply.request.headers["if-none-match"];
    if (ifNoneMatch !== undefined && ifNoneMatchHits(ifNoneMatch, etag)) return reply.code(304).send();
  }
  // Sent as JSON text: a bare string result must still be JSON ("{dev}"), which reply.send would send as text.
  const large = largeResponseBody(route, msg);
  if (large !== undefined) return large.then((body) => sendJsonText(reply, body, respondedMessage(route, msg), options));
  return sendJsonText(reply, responseBody(route, msg), respondedMessage(route, msg), options);
}

/**
 * Sends `body`, JSON text (or its UTF-8 bytes: then its length is counted in bytes), compressed (br or gzip) when it is
 * large and the client accepts it. `key`: an object that stands for this exact body as long as it lives (its compressed
 * forms are then made once), or undefined.
 */
export function sendJsonText(reply: FastifyReply, body: string | Buffer, key: object | undefined, options: Pick<ResponseOptions, "compressMinBytes">): FastifyReply | Promise<FastifyReply> {
  reply.type("application/json");
  if (body.length < options.compressMinBytes) return reply.send(body);
  reply.header("Vary", "Accept-Encoding");
  const accepted = reply.request.headers["accept-encoding"];
  const encoding = accepted ? negotiate(accepted, ENCODINGS) : null;
  if (encoding === null) return reply.send(body);
  return compressed(body, encoding, key).then((out) => reply.header("Content-Encoding", encoding).send(out));
}

/**
 * Writes `chunk`, and when the socket's buffer is full waits until it drains (or the client is gone: false). A client
 * that does not read so stops the stream from being read further — a watch then keeps only the newest state for
 * it — instead of the server buffering every event in memory.
 */
async function writeOrWait(res: FastifyReply["raw"], chunk: string | Uint8Array): Promise<boolean> {
  if (res.destroyed) return false;
  if (res.write(chunk)) return true;
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve(!res.destroyed);
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/** An SSE field value cannot hold a line break; an id that has one is not sent. */
const eventId = (tag: string | undefined) => (tag !== undefined && !/[\r\n]/.test(tag) ? tag : "");

/**
 * An event's bytes, made once per message: a watch hands all its watchers the same message for a change, and a 1 MiB
 * config's change to 300 SSE watchers spent most of a second joining and encoding the same text once per watcher.
 */
const sseFrames = new WeakMap<Message, Buffer | Promise<Buffer>>();
function sseFrame(output: DescMessage, msg: Message, idLine: string): Buffer | Promise<Buffer> {
  let frame = sseFrames.get(msg);
  if (frame === undefined) {
    // a message with a large list (a watch's first message of a large service) is joined and encoded in turns
    const prefix = `${idLine}data: `;
    const large = texts.wholeInTurns(output, msg, prefix, "\n\n");
    large?.catch(() => sseFrames.delete(msg)); // not kept when it failed
    sseFrames.set(msg, (frame = large ?? Buffer.from(`${prefix}${wholeMessageJson(output, msg)}\n\n`)));
  }
  return frame;
}

/**
 * Any other server stream is offered as Server-Sent Events: one `data: <json>` event per message. The first message
 * is awaited before the 200 goes out, so a request the service refuses (bad namespace, unknown id) gets its proper
 * 4xx; failures after that arrive as an `event: error`.
 *
 * Each event's `id:` names the state it carries (its content hash, see stateTagReader; empty when there is none, which
 * clears the client's last id); streams whose messages never carry one send no `id:` lines. A client reconnecting with
 * `Last-Event-ID` equal to the first message's id already has that state: the first message is skipped. A comment
 * line every `heartbeatMs` keeps an idle stream alive.
 */
export async function sendEventStream(reply: FastifyReply, stream: AsyncIterable<Message>, output: DescMessage, options: ResponseOptions = DEFAULT_RESPONSE_OPTIONS): Promise<void> {
  const it = stream[Symbol.asyncIterator]();
  let next = await it.next();
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", Connection: "keep-alive", "X-Accel-Buffering": "no" });
  if (reply.request.method === "HEAD") return endAndRelease(res, it);
  const lastEventId = reply.request.headers["last-event-id"];
  const tagOfMessage = stateTagReader(output);
  // Never while the socket is backed up: a heartbeat is for an idle stream, and must not grow a stalled one's buffer.
  const heartbeat = setInterval(() => {
    if (!res.destroyed && !res.writableNeedDrain) res.write(": heartbeat\n\n");
  }, options.heartbeatMs);
  heartbeat.unref();
  try {
    res.write(`retry: ${options.retryMs}\n: connected\n\n`);
    for (let first = true; !next.done; first = false, next = await it.next()) {
      const id = eventId(tagOfMessage(next.value));
      if (first && typeof lastEventId === "string" && lastEventId !== "" && id === lastEventId) continue;
      const ready = prepareAnswer(output, next.value);
      if (ready) await ready;
      const frame = sseFrame(output, next.value, tagOfMessage === NO_TAG ? "" : `id: ${id}\n`);
      if (!(await writeOrWait(res, frame instanceof Promise ? await frame : frame))) break;
    }
  } catch (err) {
    const rest = toRestError(err);
    if (rest.body.code !== "canceled" && !res.destroyed) res.write(`event: error\ndata: ${JSON.stringify(rest.body)}\n\n`);
  } finally {
    clearInterval(heartbeat);
  }
  if (next.done !== true) await endAndRelease(res, it).catch(() => {});
  else res.end();
}
