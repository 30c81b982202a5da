import { promisify } from "node:util";
import { gzip } from "node:zlib";
import type { DescMessage, DescMethodUnary, DescService, Message } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type Interceptor, type ServiceImpl, type Transport } from "@connectrpc/connect";
import { createMethodSerializationLookup, getJsonOptions, type MethodSerializationLookup } from "@connectrpc/connect/protocol";
import { errorToJsonBytes, parseTimeout, trailerMux } from "@connectrpc/connect/protocol-connect";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { binaryInTurns, jsonTexts } from "./large-lists.js";
import { refuseLostKeys } from "./lost-keys.js";
import { correctedError, type MessageLimit } from "./request-errors.js";
import { connectHttpStatus } from "./rest-status.js";
import { inProcessTransport, responsesOfErrors, type LocalService } from "./transport/in-process.js";
import { CALLER_DEADLINE_HEADER, lateCall } from "./transport/caller-deadline.js";

const gzipAsync = promisify(gzip);

/**
 * How every Connect listener reads JSON messages: a key the message does not have is refused (`invalid_argument`, naming
 * the key), as the REST API refuses it. Connect-ES ignores unknown keys by default; one rule on every protocol means a
 * misspelled field (`"wieght"`) is never silently dropped on one path and refused on the other. Binary protobuf keeps
 * its own rule: unknown fields are carried, as the format intends.
 */
export const CONNECT_JSON_OPTIONS = { ignoreUnknownFields: false } as const;

/** Connect-ES compresses answers from this size on when the client accepts it; so do we. */
const COMPRESS_MIN_BYTES = 1024;

interface Route {
  method: DescMethodUnary;
  serialization: MethodSerializationLookup<DescMessage, DescMessage>;
}

/**
 * The services `routes` registers on a Connect router, with their implementations: the same function the listener's
 * Connect plugin is given, run once against a router that only records.
 */
export function servicesOf(routes: (router: ConnectRouter) => void): LocalService[] {
  const services: LocalService[] = [];
  const recorder = {
    handlers: [],
    service(service: DescService, impl: ServiceImpl<DescService>) {
      services.push({ service, impl });
      return recorder;
    },
    rpc() {
      throw new Error("connect-unary: routes registered with router.rpc() are not supported; use router.service()");
    },
  };
  routes(recorder as unknown as ConnectRouter);
  return services;
}

/**
 * The plain Connect unary call — `POST /pkg.Service/Method` with a whole `application/proto` or `application/json`
 * body of declared length, uncompressed — served without Connect-ES's universal handler: the body is read in one
 * piece, decoded with Connect-ES's own serializers (same limits, same messages), run through the in-process transport
 * with the listener's interceptors (the same chain a Connect-ES handler runs), and answered with one write.
 *
 * Why: Connect-ES's HTTP/1.1 server path (per-call AbortControllers aborted with a DOMException at the end, web
 * `Headers` conversions, async-iterable bodies, a write per chunk and another for the end) cost ~5× the CPU of this
 * path per call here (measured ~550–1,300 µs against ~150–230 µs under the same load), and every call of the split
 * shape (gateway → service) and every outside Connect client pays it. Everything else — GET requests, compressed
 * or chunked bodies, other content types, streams, gRPC, gRPC-Web, and anything malformed enough that the fast path is
 * unsure — is left to the Connect-ES plugin, which stays registered for the same paths. One difference: a call whose
 * `connect-timeout-ms` passes is answered `deadline_exceeded` then (as the in-process transport does), where Connect-ES
 * waits for a handler that ignores its signal.
 */
export function serveConnectUnary(
  scope: FastifyInstance,
  options: { routes: (router: ConnectRouter) => void; interceptors: Interceptor[]; limit: MessageLimit; baseUrl?: string },
): void {
  const services = servicesOf(options.routes);
  const transport: Transport = inProcessTransport(services, options.interceptors, { urlBase: options.baseUrl ?? "http://connect" });
  const jsonOptions = getJsonOptions(CONNECT_JSON_OPTIONS);
  const texts = jsonTexts(jsonOptions);
  const limits = { readMaxBytes: options.limit.readMaxBytes, writeMaxBytes: 0xffffffff };
  const routes = new Map<string, Route>();
  for (const { service } of services) {
    for (const method of service.methods) {
      if (method.methodKind !== "unary") continue;
      routes.set(`/${service.typeName}/${method.name}`, { method: method as DescMethodUnary, serialization: createMethodSerializationLookup(method, undefined, jsonOptions, limits) });
    }
  }

  scope.addHook("onRequest", (request, reply, done) => {
    const route = request.method === "POST" ? routes.get(request.url) : undefined;
    const headers = request.headers;
    const type = headers["content-type"];
    const binary = type === "application/proto";
    const length = Number(headers["content-length"]);
    if (
      route === undefined ||
      (!binary && type !== "application/json" && type !== "application/json; charset=utf-8") ||
      (headers["content-encoding"] !== undefined && headers["content-encoding"] !== "identity") ||
      !(length >= 0 && length <= options.limit.readMaxBytes) // a chunked or over-size body: Connect-ES answers it
    ) {
      done();
      return;
    }
    let timeoutMs: number | undefined;
    const timeout = headers["connect-timeout-ms"];
    if (timeout !== undefined) {
      const parsed = parseTimeout(String(timeout), Number.MAX_SAFE_INTEGER);
      if (parsed.error !== undefined) return done(); // Connect-ES words the refusal
      timeoutMs = parsed.timeoutMs;
    }
    // A failure here (the client went away, or sent less than it declared) goes to the listener's error handler.
    readBody(request, length)
      .then((body) => answer(request, reply, route, binary, body, timeoutMs))
      .catch((err: unknown) => {
        // a client that left before its body arrived has nobody to answer: no error to log either
        if (err instanceof ClientGone) reply.raw.destroy();
        else void reply.send(err);
      });
  });

  async function answer(request: FastifyRequest, reply: FastifyReply, route: Route, binary: boolean, body: Buffer, timeoutMs: number | undefined) {
    let status = 200;
    let out: Uint8Array;
    let header: Headers | undefined;
    // Aborted only if the client goes away before the answer is written: a handler's work (an import) stops with it.
    const abort = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableFinished) abort.abort(new ConnectError("the client closed the connection", Code.Canceled));
    };
    reply.raw.once("close", onClose);
    try {
      let input: unknown;
      if (!binary) refuseLostKeys(body);
      try {
        input = route.serialization.getI(binary).parse(body);
      } catch (err) {
        throw correctedError(ConnectError.from(err), options.limit, route.method.input);
      }
      // Read after its caller gave up (this process was paused): not run (caller-deadline.ts). Here only: the header
      // comes from our remote transport, whose unary calls (binary, uncompressed, with a length) all take this path.
      const late = lateCall(request.headers[CALLER_DEADLINE_HEADER], Date.now());
      if (late) throw late;
      const res = await transport.unary(route.method, abort.signal, timeoutMs, request.headers as Record<string, string>, input as never, undefined);
      const message = res.message as Message;
      // An answer with a long list (of messages or strings, see large-lists.ts) is encoded a few milliseconds at a time,
      // then joined.
      if (binary) {
        const ready = binaryInTurns(route.method.output, message);
        out = route.serialization.getO(true).serialize(ready ? await ready : message);
      } else {
        const ready = texts.wholeInTurns(route.method.output, message);
        out = ready ? await ready : route.serialization.getO(false).serialize(message);
      }
      header = trailerMux(res.header, res.trailer);
    } catch (err) {
      const error = ConnectError.from(err);
      status = connectHttpStatus(error.code);
      out = errorToJsonBytes(error, {});
      // as Connect-ES answers: the handler's headers, the error's metadata over them, the handler's trailers muxed in
      const parts = responsesOfErrors.get(error);
      if (parts) {
        const merged = new Headers(parts.header);
        parts.metadata.forEach((value, name) => merged.set(name, value));
        header = trailerMux(merged, parts.trailer);
      } else header = error.metadata;
      binary = false;
    }
    if (reply.raw.destroyed) return;
    header?.forEach((value, name) => void reply.header(name, value));
    reply.header("content-type", binary ? "application/proto" : "application/json");
    if (out.byteLength >= COMPRESS_MIN_BYTES && acceptsGzip(request.headers["accept-encoding"])) {
      out = await gzipAsync(out);
      reply.header("content-encoding", "gzip");
    }
    reply.code(status).send(Buffer.from(out.buffer, out.byteOffset, out.byteLength));
  }
}

/**
 * Whether `Accept-Encoding` names gzip with a non-zero weight. `gzip;q=0` says the client cannot take it (RFC 9110
 * §12.5.3); like Connect-ES, a wildcard alone does not count — which is why this is not the REST path's negotiator
 * (@fastify/accept-negotiator takes `*` for gzip): the lean path answers as Connect-ES's handlers would.
 */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  for (const entry of String(header ?? "").split(",")) {
    const [coding, ...params] = entry.split(";").map((part) => part.trim());
    if (coding.toLowerCase() !== "gzip") continue;
    const q = params.find((param) => /^q\s*=/i.test(param));
    return q === undefined || Number(q.slice(q.indexOf("=") + 1).trim()) > 0;
  }
  return false;
}

/** The client closed the connection before its request body had arrived. */
class ClientGone extends Error {
  constructor() {
    super("the client went away");
  }
}

/** The whole request body, which the client declared `length` bytes long; it must be that long. */
function readBody(request: FastifyRequest, length: number): Promise<Buffer> {
  const raw = request.raw;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      raw.off("data", onData);
      raw.off("end", onEnd);
      raw.off("error", onError);
      raw.off("aborted", onAborted);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      if (size !== length) reject(Object.assign(new Error(`the request body is ${size} bytes, not the ${length} its content-length declares`), { statusCode: 400 }));
      else resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    };
    const onError = (err: Error & { code?: string }) => {
      cleanup();
      reject(err.code === "ECONNRESET" || err.code === "ECONNABORTED" ? new ClientGone() : err); // reset mid-body: the same
    };
    const onAborted = () => onError(new ClientGone());
    raw.on("data", onData);
    raw.on("end", onEnd);
    raw.on("error", onError);
    raw.on("aborted", onAborted);
  });
}
