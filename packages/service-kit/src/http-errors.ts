import { maxHeaderSize, type Server } from "node:http";
import type { Socket } from "node:net";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { excerpt } from "./excerpt.js";
import { REQUEST_TIMEOUT } from "./request-errors.js";

export { excerpt };

/**
 * What Fastify refuses before a route's handler or parser runs — the router's refusals, and a Content-Type that is no
 * type/subtype at all — as `{code, message}` (status, body), or undefined for an error it does not know.
 */
export function routerRefusal(err: { code?: string }): { status: number; body: { code: string; message: string } } | undefined {
  if (err.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE") {
    // refused before any parser, so before Connect-ES could name the types it takes: Fastify's words are a bare
    // "Unsupported Media Type"
    return { status: 415, body: { code: "invalid_argument", message: "the Content-Type is not a media type (type/subtype): send the one this endpoint takes, e.g. application/json (Connect), application/grpc-web" } };
  }
  if (err.code === "FST_ERR_BAD_URL") {
    return { status: 400, body: { code: "invalid_argument", message: "the URL holds a malformed percent-escape: write '%' as %25 and escape non-ASCII characters as UTF-8 bytes" } };
  }
  if (err.code === "FST_ERR_MAX_PARAM_LENGTH") {
    return { status: 400, body: { code: "invalid_argument", message: "a path segment is longer than 2048 characters, far longer than any id this API takes: send a shorter one" } };
  }
  return undefined;
}

/**
 * What Fastify itself refuses (a body it cannot parse or over its limit, a slow body, a bad URL), in the contract's
 * shape; `tooLarge` is the 413's message. Anything else is a 500 whose details stay in the log.
 */
export function fastifyRefusal(err: FastifyError, tooLarge: string): { status: number; body: { code: string; message: string } } {
  const refused = routerRefusal(err);
  if (refused) return refused;
  const status = err.statusCode ?? 500;
  if (status === 413) return { status, body: { code: "resource_exhausted", message: tooLarge } };
  if (status === 408) return { status, body: { code: "deadline_exceeded", message: `the request did not arrive in time (${REQUEST_TIMEOUT.setting}): send it at once` } };
  if (status >= 400 && status < 500) return { status, body: { code: "invalid_argument", message: excerpt(err.message) } };
  return { status: 500, body: { code: "internal", message: "internal error: the server logged the details" } };
}

/**
 * A listener's Fastify error handler: {@link fastifyRefusal}'s answer, and a 500's details in the log as `what`. A
 * body Fastify could not take (not JSON, over its limit) on a path with no route gets `notFound`'s answer instead, as
 * a good body would: the path or method is what the caller must fix first.
 */
export function refusalHandler(
  tooLarge: string,
  what: string,
  notFound: (req: FastifyRequest, reply: FastifyReply) => void,
): (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => void {
  return (err, req, reply) => {
    if (req.is404) return notFound(req, reply);
    const answer = fastifyRefusal(err, tooLarge);
    if (answer.status >= 500) req.log.error({ err, method: req.method, path: excerpt(req.url.split("?")[0]) }, what);
    void reply.status(answer.status).type("application/json").send(answer.body);
  };
}

/**
 * Fastify's `frameworkErrors`, for every listener: the router's refusals (bad percent-escape, over-long path segment)
 * in the contract's shape, never echoing the URL (Fastify's own answer quotes all of it).
 */
export function frameworkErrorHandler(err: FastifyError, _req: FastifyRequest, reply: FastifyReply): void {
  const answer = routerRefusal(err) ?? { status: 400, body: { code: "invalid_argument", message: excerpt(err.message) } };
  void reply.status(answer.status).type("application/json").send(answer.body);
}

/**
 * The most bytes of headers a request may carry, on every listener: Node's HTTP/1.1 limit (16 KiB unless the process
 * runs with `--max-http-header-size`), which counts the request line too. The h2c listener holds the same number
 * (grpc/header-limit.ts), so a call that one listener takes is never refused by the other for its headers' size.
 */
export const MAX_HEADER_BYTES = maxHeaderSize;

/** What a request whose `headers` (what they comprise on that protocol) are over {@link MAX_HEADER_BYTES} is told. */
export const headersOverLimit = (headers: string, fix: string): string =>
  `${headers} are over ${MAX_HEADER_BYTES / 1024} KiB together (Node's max-http-header-size): send ${fix}`;

/** The status a listener answers a request Node refused before Fastify saw it with (see clientErrorHandler). */
export const clientErrorStatus = (err: Error & { code?: string }): 400 | 408 => (err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400);

/**
 * Fastify's `clientErrorHandler`, for every HTTP/1.1 listener: what Node refuses before Fastify sees a request (one
 * that did not arrive within the request timeout, a URL and headers over Node's 16 KiB, bytes that are not HTTP), in
 * the contract's shape, written straight to the socket, which is then closed.
 */
export function clientErrorHandler(requestTimeoutMs: number = REQUEST_TIMEOUT.ms) {
  return (err: Error & { code?: string }, socket: Socket): void => {
    if (err.code === "ECONNRESET" || socket.destroyed) return;
    const status = clientErrorStatus(err);
    let body: { code: string; message: string };
    if (status === 408) {
      body = { code: "deadline_exceeded", message: `the request did not arrive within ${requestTimeoutMs / 1000} s (${REQUEST_TIMEOUT.setting}): send headers and body at once` };
    } else if (err.code === "HPE_HEADER_OVERFLOW") {
      body = { code: "invalid_argument", message: headersOverLimit("the request line and headers", "a shorter URL, or fewer or shorter headers (an over-long cookie or token)") };
    } else {
      body = { code: "invalid_argument", message: "the request is not valid HTTP/1.1" };
    }
    const text = JSON.stringify(body);
    if (socket.writable) {
      socket.write(`HTTP/1.1 ${status} ${status === 408 ? "Request Timeout" : "Bad Request"}\r\nContent-Length: ${Buffer.byteLength(text)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${text}`);
    }
    socket.destroy();
  };
}

/**
 * A request whose `Expect` header asks for anything but `100-continue`: Node answers 417 with no body unless someone
 * listens; every listener answers it in the contract's shape instead.
 */
export function refuseUnknownExpectations(server: Server): void {
  server.on("checkExpectation", (_req, res) => {
    const body = JSON.stringify({ code: "invalid_argument", message: "the Expect header asks for something other than 100-continue: send the request without it" });
    res.writeHead(417, { "content-type": "application/json", "content-length": Buffer.byteLength(body) }).end(body);
  });
}
