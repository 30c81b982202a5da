import type { ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler, UniversalHandlerFn, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { reencodeGrpcMessage, reencodeGrpcWebTrailer } from "./grpc-message.js";
import { mapBody } from "../universal-body.js";
import { grpcWebTextRequest, grpcWebTextResponse, isGrpcWebText } from "./grpc-web-text.js";

/**
 * Replaces each handler of `router` with one that also speaks `application/grpc-web-text` and writes `grpc-message`
 * as the gRPC spec says (see grpc-message.ts). Call it after every route is registered, before the router is served.
 * It works on Connect's universal handlers, so every adapter (Fastify, node:http) and listener gets the same wire.
 */
export function applyWireFixes(router: ConnectRouter): void {
  router.handlers.forEach((handler, i) => {
    router.handlers[i] = withWireFixes(handler);
  });
}

function withWireFixes(handler: UniversalHandler): UniversalHandler {
  const handle: UniversalHandlerFn = async (request) => {
    const text = isGrpcWebText(request.header.get("content-type"));
    const res = await handler(text ? grpcWebTextRequest(request) : request);
    const fixed = { ...res, body: res.body && fixBody(res, res.body) };
    reencodeGrpcMessage(res.trailer);
    return text ? grpcWebTextResponse(fixed) : fixed;
  };
  const { protocolNames, service, method, requestPath, allowedMethods, supportedContentType } = handler;
  return Object.assign(handle, { protocolNames, service, method, requestPath, allowedMethods, supportedContentType });
}

/** The body with gRPC-Web's trailer frame re-encoded, and gRPC's HTTP trailers once it has ended (Connect fills them in only then). */
function fixBody(res: UniversalServerResponse, body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  const grpcWeb = res.header?.get("content-type")?.startsWith("application/grpc-web") ?? false;
  return mapBody(body, grpcWeb ? reencodeGrpcWebTrailer : undefined, () => reencodeGrpcMessage(res.trailer));
}
