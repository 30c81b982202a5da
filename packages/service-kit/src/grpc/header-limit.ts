import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { headersOverLimit, MAX_HEADER_BYTES } from "../http-errors.js";
import { encodeGrpcMessage } from "./grpc-message.js";

/**
 * The most bytes of headers Node decodes for one stream of the h2c listener (its SETTINGS_MAX_HEADER_LIST_SIZE, counted
 * as HTTP/2 counts it: name + value + 32 per field). Not a second limit: a list over {@link MAX_HEADER_BYTES} up to this
 * size reaches {@link refuseOversizedHeaders}, which can answer it in the caller's protocol, naming the limit. Past it,
 * once the client has acknowledged the setting, Node resets the stream (RST_STREAM ENHANCE_YOUR_CALM, which grpc-js
 * reports as RESOURCE_EXHAUSTED "Bandwidth exhausted or memory limit exceeded") without decoding more; the connection
 * and its other calls go on. Without it Node decoded a stream's headers until nghttp2's own bounds closed the whole
 * connection (GOAWAY: one field over 64 KiB HPACK-encoded; 4 × 40 KiB of random metadata, measured), as they still do
 * for a field that long or a far larger block (16 × 40 KiB).
 */
export const H2_HEADER_LIST_CAP = 4 * MAX_HEADER_BYTES;

/** HTTP/2's size of a header list (RFC 9113 §6.5.2), pseudo-headers included: what SETTINGS_MAX_HEADER_LIST_SIZE bounds. */
function headerListSize(raw: string[]): number {
  let size = 0;
  for (let i = 0; i < raw.length; i++) size += raw[i].length + 16; // 32 per field, half of it on the name and the value each
  return size;
}

type RequestListener = (req: Http2ServerRequest, res: Http2ServerResponse) => void;

/**
 * Holds an h2c listener's requests to the HTTP/1.1 listener's header limit. On HTTP/1.1 Node refuses headers over
 * {@link MAX_HEADER_BYTES} before any route (400 invalid_argument, http-errors.ts); on HTTP/2 it took them, and a gRPC
 * call with 20 KiB of metadata was served on one port and refused on the other. Such a request is answered here,
 * before any route, with the same code and message in its protocol: gRPC and gRPC-Web get a trailers-only answer
 * (`grpc-status: 3`, INVALID_ARGUMENT), anything else 400 `{code, message}`. Its body is read and dropped. Checked
 * here rather than left to SETTINGS_MAX_HEADER_LIST_SIZE alone: a reset carries no message, and a client's first
 * streams, sent before it acknowledged the setting, are not held to it. Call it once Fastify's request listener is on
 * the server.
 */
export function refuseOversizedHeaders(server: { listeners(event: "request"): Function[]; removeAllListeners(event: "request"): unknown; on(event: "request", l: RequestListener): unknown }): void {
  const inner = server.listeners("request") as RequestListener[];
  server.removeAllListeners("request");
  server.on("request", function (this: unknown, req, res) {
    if (headerListSize(req.rawHeaders) <= MAX_HEADER_BYTES) {
      for (const listener of inner) listener.call(this, req, res);
      return;
    }
    const message = headersOverLimit("the request's headers (as HTTP/2 counts them: 32 bytes more each)", "fewer or shorter headers or metadata (an over-long cookie or token)");
    const grpcType = /^application\/grpc(-web(-text)?)?(\+[\w-]+)?/.exec(String(req.headers["content-type"] ?? "").toLowerCase());
    req.resume();
    if (res.stream.destroyed) return;
    if (grpcType) {
      // trailers-only, as every gRPC error before a message: the status rides on the one HEADERS frame that ends the stream
      const type = grpcType[1] ? `application/grpc-web${grpcType[2] ?? ""}+proto` : "application/grpc+proto";
      res.stream.respond({ ":status": 200, "content-type": type, "grpc-status": "3", "grpc-message": encodeGrpcMessage(message) }, { endStream: true });
    } else {
      const body = JSON.stringify({ code: "invalid_argument", message });
      res.writeHead(400, { "content-type": "application/json", "content-length": Buffer.byteLength(body) }).end(body);
    }
  });
}
