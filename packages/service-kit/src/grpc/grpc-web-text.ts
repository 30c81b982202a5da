import { Code, ConnectError } from "@connectrpc/connect";
import type { UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";

/**
 * `application/grpc-web-text`: gRPC-Web with the body in base64, for clients that cannot send or read binary bodies
 * (old browsers, some proxies). Connect-ES speaks only binary gRPC-Web, so the text form is translated around it: the
 * request body is decoded on the way in, each response chunk is encoded on the way out.
 */
const TEXT = /^application\/grpc-web-text(?:\+proto)?(?:;|$)/i;

export function isGrpcWebText(contentType: string | null): boolean {
  return contentType !== null && TEXT.test(contentType);
}

/** The same request as binary gRPC-Web. */
export function grpcWebTextRequest(req: UniversalServerRequest): UniversalServerRequest {
  const header = new Headers(req.header);
  header.set("content-type", "application/grpc-web+proto");
  return { ...req, header, body: decodeBase64Stream(req.body as AsyncIterable<Uint8Array>) };
}

/** The binary gRPC-Web answer as text: each chunk is encoded on its own, so a streamed message is never held back. */
export function grpcWebTextResponse(res: UniversalServerResponse): UniversalServerResponse {
  if (!res.header?.get("content-type")?.startsWith("application/grpc-web")) return res; // 415, 405 …: nothing to encode
  const header = new Headers(res.header);
  header.set("content-type", "application/grpc-web-text+proto");
  return { ...res, header, body: res.body && encodeBase64Stream(res.body) };
}

async function* encodeBase64Stream(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for await (const chunk of body) yield Buffer.from(Buffer.from(chunk).toString("base64"), "latin1");
}

/**
 * Base64 text in arbitrary chunks → bytes. Senders may pad each message separately, so padding can occur mid-stream;
 * whole 4-character groups are decoded as soon as they are complete, and a padded group ends a segment.
 */
async function* decodeBase64Stream(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  let pending = "";
  for await (const chunk of body) {
    pending += Buffer.from(chunk).toString("latin1").replace(/[\s]/g, "");
    const whole = pending.length - (pending.length % 4);
    if (whole === 0) continue;
    yield decodeGroups(pending.slice(0, whole));
    pending = pending.slice(whole);
  }
  if (pending.length > 0) throw new ConnectError("grpc-web-text body is not valid base64: its length is not a multiple of 4", Code.InvalidArgument);
}

function decodeGroups(text: string): Uint8Array {
  if (/[^A-Za-z0-9+/=]/.test(text)) throw new ConnectError("grpc-web-text body is not valid base64: send the messages base64-encoded, or use application/grpc-web", Code.InvalidArgument);
  // Node stops at the first padding, so decode each padded segment separately.
  return Buffer.concat(text.split(/(?<==)(?=[^=])/).map((segment) => Buffer.from(segment, "base64")));
}
