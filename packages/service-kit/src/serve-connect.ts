import type { Http2Server } from "node:http2";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { Health } from "@gov/api/gen/health/v1/health_pb";
import { fastify, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { vouchForwardedFor } from "./client-address.js";
import { registerCors } from "./cors.js";
import { logListening, quietFastifyLogging } from "./fastify-logging.js";
import { alwaysServing, healthRoutes, type ServingState } from "./grpc/health.js";
import { reflectionRoutes } from "./grpc/reflection.js";
import { refuseFullDuplexOnHttp1 } from "./grpc/full-duplex.js";
import { answerHttp1OnH2c, type Http1Listener } from "./grpc/http1-on-h2c.js";
import { H2_HEADER_LIST_CAP, refuseOversizedHeaders } from "./grpc/header-limit.js";
import { answerUnknownRpc } from "./grpc/unknown-rpc.js";
import { applyWireFixes } from "./grpc/wire-fixes.js";
import { refuseExpiredDeadlines } from "./expired-deadline.js";
import { fixRequestErrors, REQUEST_TIMEOUT, type RequestGuards } from "./request-errors.js";
import { CONNECT_JSON_OPTIONS, serveConnectUnary } from "./connect-unary.js";
import { largeListsSerialization } from "./large-lists.js";
import { clientErrorHandler, excerpt, frameworkErrorHandler, refusalHandler, refuseUnknownExpectations } from "./http-errors.js";
import type { Logger } from "./logger.js";

/** Requests one HTTP/1.1 connection to a service's listener serves before the answer closes it (see connectApp). */
export const MAX_REQUESTS_PER_CONNECTION = 100;

export interface ConnectRoutesOptions {
  routes: (router: ConnectRouter) => void;
  interceptors?: Interceptor[];
  logger: Logger;
  /** Largest request message accepted, in bytes. */
  readMaxBytes?: number;
  /** The setting behind readMaxBytes, named when a message is refused as too large. */
  readMaxBytesSetting?: string;
  /** A call's request message must have arrived this long after it started (default 60 s, gov.limits.request-timeout). */
  requestTimeoutMs?: number;
  /** What grpc.health.v1.Health reports on the gRPC listener (the process's readiness). Default: always SERVING. */
  serving?: ServingState;
  /** `gov.cors.origins`: browser origins allowed on the HTTP/1.1 listener (Connect, gRPC-Web). Default none: CORS off. */
  corsOrigins?: readonly string[];
  /** `gov.security.trusted-proxies`: whose `x-forwarded-for` is believed (else it is replaced by the peer's address). */
  trustedProxies?: readonly string[];
  /** On an h2c listener: the process's HTTP/1.1 listener, which a plain HTTP/1.1 request sent here is told to use. */
  http1Listener?: Http1Listener;
}

export interface ServeConnectOptions extends ConnectRoutesOptions {
  /** HTTP/1.1 port: Connect and gRPC-Web (what the gateway and browsers use). 0 = any free port. */
  port: number;
  /** h2c port: gRPC (and Connect / gRPC-Web over HTTP/2). 0 = any free port. */
  grpcPort: number;
  host?: string;
}

export interface ConnectServer {
  /** `http://host:port` of the HTTP/1.1 listener. */
  url: string;
  /** `http://host:port` of the h2c listener. */
  grpcUrl: string;
  close(): Promise<void>;
}

/**
 * An h2c (plaintext HTTP/2) server with the Connect routes, for gRPC clients. Plaintext HTTP/1.1 and h2c cannot share
 * one port in Node without reading the first bytes in JavaScript, which halves HTTP/1.1 throughput (measured), so
 * gRPC gets a port of its own.
 */
export function createH2cServer(options: ConnectRoutesOptions): Promise<FastifyInstance> {
  return connectApp(options, true);
}

/** The HTTP/1.1 half of {@link serveConnect}, not yet listening: Connect and gRPC-Web (a service's own process). */
export function createConnectServer(options: ConnectRoutesOptions): Promise<FastifyInstance> {
  return connectApp(options, false);
}

async function connectApp(options: ConnectRoutesOptions, http2: boolean): Promise<FastifyInstance> {
  const app = fastify({
    http2: http2 as false, // one code path for both; fastify's overloads want a literal
    ...quietFastifyLogging(options.logger, "child"),
    // Streams never finish on their own, and Node 20 does not end open h2 sessions on close(): without this,
    // shutdown would wait for clients forever.
    forceCloseConnections: true,
    // A request (headers and body) must arrive within the request timeout; an idle h2 session is closed after it.
    requestTimeout: options.requestTimeoutMs ?? REQUEST_TIMEOUT.ms,
    // Node checks that timeout every 30 s by default, which lets a slow request live almost twice as long.
    ...(http2 ? {} : { http: { connectionsCheckingInterval: 1000, headersTimeout: Math.min(60_000, options.requestTimeoutMs ?? REQUEST_TIMEOUT.ms) } }),
    // HTTP/1.1's header limit is Node's own; on h2c it is held by refuseOversizedHeaders, and Node decodes no more
    // than this of a stream's headers (grpc/header-limit.ts). Fastify hands `http` to http2.createServer too.
    ...(http2 ? ({ http: { settings: { maxHeaderListSize: H2_HEADER_LIST_CAP } } } as object) : {}), // the h1 overload does not know it
    // A gateway keeps its connections to a service open for as long as it runs; behind a per-connection balancer (a
    // Kubernetes Service) the replicas of a service would keep the shares they had when those connections were made —
    // all of them on the one that stayed up during a rolling restart. Closing each after this many requests
    // (`Connection: close` on the last answer) spreads them again as they are used; a new connection costs the two
    // sides tens of µs of CPU, well under 1 µs per request at this count.
    ...(http2 ? {} : { maxRequestsPerSocket: MAX_REQUESTS_PER_CONNECTION }),
    ...({ http2SessionTimeout: options.requestTimeoutMs ?? REQUEST_TIMEOUT.ms } as object), // h2 only; the h1 overload does not know it
    // The router's and Node's own refusals (bad escapes, over-long URLs, slow requests) in the contract's shape.
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler: clientErrorHandler(options.requestTimeoutMs ?? REQUEST_TIMEOUT.ms),
  });
  logListening(app as unknown as FastifyInstance, options.logger);
  if (!http2) refuseUnknownExpectations((app as unknown as FastifyInstance).server);
  // HTTP/1.1 sent here (curl without --http2-prior-knowledge) is told where to go, in the contract's shape.
  else {
    answerHttp1OnH2c(app.server as unknown as Http2Server, { http1Listener: options.http1Listener, timeoutMs: options.requestTimeoutMs ?? REQUEST_TIMEOUT.ms });
    // headers over HTTP/1.1's limit are refused as there, in the caller's protocol, before any route
    refuseOversizedHeaders(app.server as never);
  }
  // Health watches end when the listener closes, so probes reconnect elsewhere instead of holding shutdown up.
  const closing = new AbortController();
  app.addHook("preClose", (done) => {
    closing.abort();
    done();
  });
  const grpcExtras = http2 ? { serving: options.serving ?? alwaysServing, closing: closing.signal } : undefined;
  if (!http2) await registerCors(app as unknown as FastifyInstance, options.corsOrigins ?? []); // browsers speak HTTP/1.1 here, not h2c
  // What Fastify itself refuses — a content type no parser takes (before Connect-ES sees the call) — in the contract's
  // shape rather than Fastify's; a body it cannot parse or over its default limit on a path that is no RPC gets the
  // same `unimplemented` / 404 as with a good body. Set before the RPC scope is registered, which takes the handler its
  // parent has then.
  const notFound = (req: FastifyRequest, reply: FastifyReply): void => {
    if (answerUnknownRpc(req, reply)) return;
    void reply.status(404).send({ code: "not_found", message: `no endpoint ${req.method} ${excerpt(req.url.split("?")[0])}: this listener serves RPCs only` });
  };
  app.setErrorHandler(refusalHandler(`the request body is over the limit of ${app.initialConfig.bodyLimit} bytes for a path that is not an RPC of this listener`, "request failed", notFound));
  await registerRpcs(app as unknown as FastifyInstance, { ...options, http2, grpc: grpcExtras });
  app.setNotFoundHandler(notFound);
  return app as unknown as FastifyInstance;
}

/**
 * The service's routes as every listener serves them: `application/grpc-web-text` accepted and `grpc-message` encoded
 * per the gRPC spec; on a gRPC listener also server reflection (v1, v1alpha) and grpc.health.v1.Health, which
 * describe exactly the services `routes` registers.
 */
function connectRoutes(routes: (router: ConnectRouter) => void, grpc?: { serving: ServingState; closing: AbortSignal }, guards?: RequestGuards): (router: ConnectRouter) => void {
  return (router) => {
    routes(router);
    if (grpc) {
      const served = [...new Set(router.handlers.map((h) => h.service))];
      reflectionRoutes([...served, Health])(router);
      healthRoutes(served.map((s) => s.typeName), grpc.serving, grpc.closing)(router);
    }
    refuseExpiredDeadlines(router, guards?.limit?.readMaxBytes ?? DEFAULT_READ_MAX_BYTES); // grpc-timeout: 0n, as Connect's 0
    refuseFullDuplexOnHttp1(router); // in the contract's shape, not Connect-ES's bare 505
    fixRequestErrors(router, guards); // inside the wire fixes, which must see the corrected status
    applyWireFixes(router);
  };
}

export type RpcScopeOptions = Pick<ConnectRoutesOptions, "routes" | "interceptors" | "readMaxBytes" | "readMaxBytesSetting" | "requestTimeoutMs" | "trustedProxies"> & {
  /** An h2c listener: no plain unary fast path (it reads HTTP/1.1 bodies). */
  http2?: boolean;
  /** On a gRPC listener: reflection and grpc.health.v1.Health beside the services, and what Health reports. */
  grpc?: { serving: ServingState; closing: AbortSignal };
  /** Which protocols the Connect-ES plugin serves (all by default; the gateway's port serves no gRPC). */
  protocols?: { grpc?: boolean; grpcWeb?: boolean; connect?: boolean };
};

/**
 * The RPC scope of a listener — a service's own, or the gateway's Connect port: a client's own `x-forwarded-for` is
 * not believed, plain Connect unary calls over HTTP/1.1 skip Connect-ES's universal handler (connect-unary.ts), and the
 * Connect-ES plugin serves everything else on the same paths with the wire fixes, long lists encoded in turns
 * (large-lists.ts) and unknown JSON keys refused. In one place, so that no listener serves RPCs without one of them.
 */
export async function registerRpcs(app: FastifyInstance, options: RpcScopeOptions): Promise<void> {
  const guards = guardsOf(options);
  const interceptors = options.interceptors ?? [];
  await app.register(async (rpcs) => {
    // Every content type reaches Connect-ES, whose 415 is answered with the types it takes (bareRefusal in
    // request-errors.ts). Without a parser for a type Fastify refused it first, as a bare "Unsupported Media Type":
    // curl's default with -d (application/x-www-form-urlencoded) among them. The body is left unread, as Connect-ES
    // refuses a content type before it reads a body; the plugin's own parsers still take the types it serves.
    rpcs.addContentTypeParser("*", (_req, _payload, done) => done(null, undefined));
    vouchForwardedFor(rpcs, options.trustedProxies ?? []);
    if (!options.http2) serveConnectUnary(rpcs, { routes: options.routes, interceptors, limit: guards.limit! });
    await rpcs.register(fastifyConnectPlugin, {
      routes: connectRoutes(options.routes, options.grpc, guards),
      interceptors: [LARGE_LISTS.interceptor, ...interceptors],
      readMaxBytes: guards.limit!.readMaxBytes,
      jsonOptions: LARGE_LISTS.jsonOptions,
      ...options.protocols,
    });
  });
}

/** One for every listener of the process: the elements' encodings it keeps are then shared by them all. */
const LARGE_LISTS = largeListsSerialization(CONNECT_JSON_OPTIONS);

/** Without a configured limit a listener still refuses messages over 4 MiB (gRPC's customary default), before buffering them. */
const DEFAULT_READ_MAX_BYTES = 4 * 1024 * 1024;

function guardsOf(options: Pick<ConnectRoutesOptions, "readMaxBytes" | "readMaxBytesSetting" | "requestTimeoutMs">): RequestGuards {
  const readMaxBytes = options.readMaxBytes ?? DEFAULT_READ_MAX_BYTES;
  return { limit: { readMaxBytes, setting: options.readMaxBytesSetting ?? "the listener's message limit" }, bodyTimeoutMs: options.requestTimeoutMs };
}

const urlOf = (app: FastifyInstance, host: string) => `http://${host}:${(app.server.address() as { port: number }).port}`;

/** Serves a service's Connect routes: Connect + gRPC-Web on `port` (HTTP/1.1), gRPC on `grpcPort` (h2c). */
export async function serveConnect(options: ServeConnectOptions): Promise<ConnectServer> {
  const host = options.host ?? "127.0.0.1";
  const h1 = await connectApp(options, false);
  const h2 = await connectApp({ http1Listener: () => (h1.server.listening ? { url: urlOf(h1, host), serves: "Connect and gRPC-Web" } : undefined), ...options }, true);
  await h1.listen({ port: options.port, host });
  await h2.listen({ port: options.grpcPort, host });
  return {
    url: urlOf(h1, host),
    grpcUrl: urlOf(h2, host),
    close: async () => {
      await Promise.all([h1.close(), h2.close()]);
    },
  };
}
