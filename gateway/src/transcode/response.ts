import { toJson, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import type { FastifyReply } from "fastify";
import { toRestError } from "../errors.js";
import type { RestRoute } from "./rest-routes.js";

const JSON_OPTIONS = { alwaysEmitImplicit: true } as const;

// JSON text of message-typed response fields, by message identity: services hand out the same immutable message for
// an unchanged record (e.g. a cached config), so a hot read is serialized once, not on every request.
const jsonText = new WeakMap<Message, string>();

/** The JSON text the REST API answers: the whole message, or just the rule's response field (`true`, `["a.yaml"]`). */
export function responseBody(route: RestRoute, msg: Message): string {
  const field = route.responseField;
  if (!field) return JSON.stringify(toJson(route.method.output, msg, JSON_OPTIONS));
  const value = (msg as unknown as Record<string, unknown>)[field.localName];
  if (field.fieldKind === "message") {
    if (value === undefined) return "null";
    let text = jsonText.get(value as Message);
    if (text === undefined) {
      text = JSON.stringify(toJson(field.message, value as Message, JSON_OPTIONS));
      jsonText.set(value as Message, text);
    }
    return text;
  }
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
 * name in RFC 5987 form for clients that read it.
 */
function contentDisposition(fileName: string): string {
  const ascii = fileName.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(fileName)}`;
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
  try {
    if (head) res.write(pick(head)?.data ?? new Uint8Array());
    for (let next = await it.next(); !next.done; next = await it.next()) {
      const data = pick(next.value)?.data;
      if (data?.length && !res.write(data)) await new Promise((r) => res.once("drain", r));
    }
    res.end();
  } catch (err) {
    reply.log.error({ err, reqId: reply.request.id, url: reply.request.url }, "stream failed after the response started");
    res.destroy(err as Error); // the client sees a truncated transfer, never a corrupt "complete" archive
  }
}

/**
 * Any other server stream is offered as Server-Sent Events: one `data: <json>` event per message. The first message
 * is awaited before the 200 goes out, so a request the service refuses (bad namespace, unknown id) gets its proper
 * 4xx; failures after that arrive as an `event: error`.
 */
export async function sendEventStream(reply: FastifyReply, stream: AsyncIterable<Message>, output: DescMessage): Promise<void> {
  const it = stream[Symbol.asyncIterator]();
  const first = await it.next();
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", Connection: "keep-alive", "X-Accel-Buffering": "no" });
  res.write(": connected\n\n");
  try {
    for (let next = first; !next.done; next = await it.next()) {
      res.write(`data: ${JSON.stringify(toJson(output, next.value, JSON_OPTIONS))}\n\n`);
    }
  } catch (err) {
    const rest = toRestError(err);
    if (rest.body.code !== "canceled") res.write(`event: error\ndata: ${JSON.stringify(rest.body)}\n\n`);
  }
  res.end();
}
