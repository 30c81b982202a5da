import { Code, ConnectError, createConnectRouter, type ConnectRouter } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import type { UniversalHandler, UniversalHandlerFn } from "@connectrpc/connect/protocol";
import { parseTimeout as parseConnectTimeout } from "@connectrpc/connect/protocol-connect";
import { parseTimeout as parseGrpcTimeout } from "@connectrpc/connect/protocol-grpc";
import { CONNECT_JSON_OPTIONS } from "./connect-unary.js";
import { LONGEST_TIMER_MS } from "./longest-timer.js";

const GRPC = /^application\/grpc/i;

/**
 * A call that arrives with its deadline already passed — `grpc-timeout: 0n` (or `0m`, `0S` …: any zero, and anything
 * under a millisecond, `999u`, `1n`: less time than it takes to read the request) on gRPC and gRPC-Web,
 * `connect-timeout-ms: 0` on Connect — is answered `deadline_exceeded` without being started: no interceptor
 * and no handler runs, so nothing is applied. That is what the plain Connect unary path does (connect-unary.ts, through
 * the in-process transport); Connect-ES would start the call with an already-aborted signal, and a handler that does
 * not look at it (a write) would run to the end. A malformed timeout is left to Connect-ES, which words the refusal.
 *
 * The refusal is produced by Connect-ES itself, by a handler of the same method and protocols whose implementation
 * fails at once: that gives each protocol's exact error framing. Like the real handler it reads a unary (or
 * server-streaming) call's one request message first, with the same limit, so a request that cannot be decoded is
 * refused as such on every path. Call it after every route is registered, inside fixRequestErrors.
 */
export function refuseExpiredDeadlines(router: ConnectRouter, readMaxBytes: number): void {
  router.handlers.forEach((handler, i) => {
    router.handlers[i] = withDeadlineCheck(handler, readMaxBytes);
  });
}

function withDeadlineCheck(handler: UniversalHandler, readMaxBytes: number): UniversalHandler {
  const protocols = handler.protocolNames;
  const expired = () => {
    throw new ConnectError("the operation timed out", Code.DeadlineExceeded); // the words of Connect's own deadline
  };
  const refusal = createConnectRouter({
    grpc: protocols.includes("grpc"),
    grpcWeb: protocols.includes("grpc-web"),
    connect: protocols.includes("connect"),
    readMaxBytes,
    jsonOptions: CONNECT_JSON_OPTIONS,
    acceptCompression: [compressionGzip, compressionBrotli], // what the Fastify plugin accepts
  }).rpc(handler.method as never, expired as never).handlers[0];
  const handle: UniversalHandlerFn = (request) => {
    const type = request.header.get("content-type") ?? "";
    const grpc = GRPC.test(type);
    const value = request.header.get(grpc ? "grpc-timeout" : "connect-timeout-ms");
    if (value === null || !handler.allowedMethods.includes(request.method) || (type !== "" && !handler.supportedContentType(type))) return handler(request);
    const timeout = grpc ? parseGrpcTimeout(value, Number.MAX_SAFE_INTEGER) : parseConnectTimeout(value, Number.MAX_SAFE_INTEGER);
    if (timeout.error !== undefined) return handler(request);
    if (timeout.timeoutMs! < 1) return refusal(request);
    if (timeout.timeoutMs! > LONGEST_TIMER_MS) {
      // Connect-ES would arm a timer Node cannot hold, which fires after 1 ms: the call would fail at once with
      // deadline_exceeded. The deadline becomes the longest one a timer takes (~24.8 days) instead.
      const header = new Headers(request.header);
      header.set(grpc ? "grpc-timeout" : "connect-timeout-ms", grpc ? `${Math.floor(LONGEST_TIMER_MS / 1000)}S` : String(LONGEST_TIMER_MS));
      return handler({ ...request, header });
    }
    return handler(request);
  };
  const { protocolNames, service, method, requestPath, allowedMethods, supportedContentType } = handler;
  return Object.assign(handle, { protocolNames, service, method, requestPath, allowedMethods, supportedContentType });
}
