import type { DescMethodBiDiStreaming } from "@bufbuild/protobuf";
import { Code, ConnectError, createConnectRouter, type ConnectRouter } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import type { UniversalHandler, UniversalHandlerFn, UniversalServerRequest } from "@connectrpc/connect/protocol";

const CODE = Code.FailedPrecondition;
/** The contract's status for failed_precondition (Connect's own mapping says 400). */
const HTTP_STATUS = 412;

const messageFor = (handler: UniversalHandler) =>
  `${handler.method.parent.name}.${handler.method.name} is a bidirectional stream and needs HTTP/2, which this HTTP/1.1 request is not ` +
  "(HTTP/1.1 is half duplex): call it over gRPC, or Connect over HTTP/2, on the gRPC port (h2c; gov.grpc.port, 9090 by default, " +
  "or the service's own grpc-port)";

/**
 * Connect-ES refuses a bidirectional stream that arrives over HTTP/1.1 with a bare 505 (no body), before any handler
 * runs. This answers the same refusal in the contract's error shape, in the request's own protocol: a Connect or
 * gRPC-Web client gets failed_precondition in its end-of-stream message with a message that says what to use
 * instead; anything else gets `{code, message}` JSON. The connection is closed after it, as Connect-ES does (a client
 * that expected full duplex may otherwise hang). Call it after every route is registered.
 */
export function refuseFullDuplexOnHttp1(router: ConnectRouter): void {
  router.handlers.forEach((handler, i) => {
    if (handler.method.methodKind === "bidi_streaming") router.handlers[i] = withHttp1Refusal(handler);
  });
}

function withHttp1Refusal(handler: UniversalHandler): UniversalHandler {
  const message = messageFor(handler);
  // The refusal is produced by Connect itself, by a handler of the same method whose implementation fails at once:
  // that gives each protocol's exact error framing. It never reads the request.
  const refusal = createConnectRouter().rpc(handler.method as DescMethodBiDiStreaming, async function* () {
    throw new ConnectError(message, CODE);
  }).handlers[0];
  const json = new TextEncoder().encode(JSON.stringify({ code: codeToString(CODE), message }));
  const handle: UniversalHandlerFn = async (request: UniversalServerRequest) => {
    if (!request.httpVersion.startsWith("1.")) return handler(request);
    const contentType = request.header.get("content-type") ?? "";
    if (handler.allowedMethods.includes(request.method) && handler.supportedContentType(contentType)) {
      const res = await refusal({ ...request, httpVersion: "2" });
      const header = new Headers(res.header);
      header.set("connection", "close");
      return { ...res, header };
    }
    return {
      status: HTTP_STATUS,
      header: new Headers({ "content-type": "application/json", "content-length": String(json.byteLength), connection: "close" }),
      body: (async function* () {
        yield json;
      })(),
    };
  };
  const { protocolNames, service, method, requestPath, allowedMethods, supportedContentType } = handler;
  return Object.assign(handle, { protocolNames, service, method, requestPath, allowedMethods, supportedContentType });
}
