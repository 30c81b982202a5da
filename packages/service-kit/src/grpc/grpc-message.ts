/**
 * `grpc-message` as the gRPC spec writes it: percent-encode only the bytes outside printable ASCII (0x20–0x7E) and
 * `%` itself. Connect-ES encodes with `encodeURIComponent`, which also escapes `: , / ? # …`; grpc-js decodes with
 * `decodeURI`, which leaves those escapes alone, so its users read `%3A`, `%2C`, `%2F` in every error message.
 */
export function encodeGrpcMessage(message: string): string {
  let out = "";
  for (const byte of new TextEncoder().encode(message)) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** Re-encodes a `grpc-message` that Connect-ES wrote (`encodeURIComponent`) the way the spec says, in place. */
export function reencodeGrpcMessage(headers: Headers | undefined): void {
  const value = headers?.get("grpc-message");
  if (value == null) return;
  let message: string;
  try {
    message = decodeURIComponent(value);
  } catch {
    return; // not written by Connect-ES: leave it as it is
  }
  headers!.set("grpc-message", encodeGrpcMessage(message));
}

/**
 * gRPC-Web sends its trailers as the body's last frame (flag 0x80, then `name: value\r\n` lines). Re-encodes the
 * `grpc-message` in such a frame; any other chunk (a message, a partial frame) is returned as is. A trailer frame
 * Connect-ES compressed arrives here inflated (request-errors.ts inflates it first).
 */
export function reencodeGrpcWebTrailer(chunk: Uint8Array): Uint8Array {
  if (chunk.length < 5 || chunk[0] !== 0x80) return chunk;
  const length = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength).getUint32(1);
  if (chunk.length !== 5 + length) return chunk;
  const headers = new Headers();
  for (const line of new TextDecoder().decode(chunk.subarray(5)).split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  if (!headers.has("grpc-message")) return chunk;
  reencodeGrpcMessage(headers);
  let text = "";
  headers.forEach((value, name) => (text += `${name}: ${value}\r\n`));
  const payload = new TextEncoder().encode(text);
  const frame = new Uint8Array(5 + payload.length);
  frame[0] = 0x80;
  new DataView(frame.buffer).setUint32(1, payload.length);
  frame.set(payload, 5);
  return frame;
}
