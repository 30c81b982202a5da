import type { ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler, UniversalHandlerFn, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { reencodeGrpcMessage, reencodeGrpcWebTrailer } from "./grpc-message.js";
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

/**
 * The body with gRPC-Web's trailer frame re-encoded, and gRPC's HTTP trailers re-encoded once it has ended (Connect
 * fills them in only then). next/throw/return go straight to Connect's iterator, which aborts the call on them.
 */
function fixBody(res: UniversalServerResponse, body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  const grpcWeb = res.header?.get("content-type")?.startsWith("application/grpc-web") ?? false;
  return {
    [Symbol.asyncIterator]() {
      const it = body[Symbol.asyncIterator]();
      const step = async (result: Promise<IteratorResult<Uint8Array>>): Promise<IteratorResult<Uint8Array>> => {
        try {
          const r = await result;
          if (r.done) reencodeGrpcMessage(res.trailer);
          else if (grpcWeb) return { done: false, value: reencodeGrpcWebTrailer(r.value) };
          return r;
        } catch (err) {
          reencodeGrpcMessage(res.trailer);
          throw err;
        }
      };
      return {
        next: () => step(it.next()),
        throw: (err?: unknown) => step(it.throw ? it.throw(err) : Promise.reject(err)),
        return: (value?: unknown) => step(it.return ? it.return(value) : Promise.resolve({ done: true as const, value })),
      };
    },
  };
}
