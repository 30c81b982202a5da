import { Http2ServerResponse } from "node:http2";
import type { FastifyReply, FastifyRequest } from "fastify";
import { encodeGrpcMessage } from "./grpc-message.js";

/** `/package.Service/Method`: the path of an RPC in every protocol. */
const RPC_PATH = /^\/[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\/[A-Za-z_]\w*$/;

/**
 * Answers a request for an RPC the server does not have, in the protocol it was asked in: gRPC and gRPC-Web get
 * `grpc-status: 12` (UNIMPLEMENTED) as a trailers-only response (HTTP 200, as their clients expect), Connect gets
 * `{"code":"unimplemented"}` with HTTP 404 (Connect clients read 404 as unimplemented). Returns false, answering
 * nothing, when the request is not an RPC (e.g. an unknown REST path), so the caller's own 404 applies. `servedElsewhere`:
 * why an RPC that exists is not served here (a gateway's remote service), said instead of "check the name".
 */
export function answerUnknownRpc(request: FastifyRequest, reply: FastifyReply, servedElsewhere?: (path: string) => string | undefined): boolean {
  const contentType = String(request.headers["content-type"] ?? "").toLowerCase();
  const path = request.url.split("?")[0];
  const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
  const message = servedElsewhere?.(path) ?? `no RPC method ${shown} here: check the package, service and method name against the proto`;

  const grpcType = /^application\/grpc(-web(-text)?)?(\+[\w-]+)?/.exec(contentType);
  if (grpcType) {
    const responseType = grpcType[1] ? `application/grpc-web${grpcType[2] ?? ""}+proto` : "application/grpc+proto";
    const headers = { "content-type": responseType, "grpc-status": "12", "grpc-message": encodeGrpcMessage(message) };
    if (reply.raw instanceof Http2ServerResponse) {
      // Trailers-only means the status rides on the one HEADERS frame that ends the stream; grpc-js insists on it.
      reply.hijack();
      reply.raw.stream.respond({ ":status": 200, ...headers }, { endStream: true });
    } else {
      void reply.status(200).headers(headers).send();
    }
    return true;
  }
  const connect = contentType.startsWith("application/connect+") || request.headers["connect-protocol-version"] !== undefined;
  const connectUnary = RPC_PATH.test(path) && (request.method === "GET" || (request.method === "POST" && /^application\/(json|proto)/.test(contentType)));
  if (!connect && !connectUnary) return false;
  void reply.status(404).type("application/json").send({ code: "unimplemented", message });
  return true;
}
