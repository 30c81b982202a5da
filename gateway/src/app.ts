import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, Interceptor, Transport } from "@connectrpc/connect";
import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import { fastify, type FastifyInstance, type FastifyRequest } from "fastify";
import { logListening, quietFastifyLogging, refuseUnknownExpectations, registerCors, registerRpcs, REQUEST_TIMEOUT, servicesOf, type Logger } from "@gov/service-kit";
import { clientErrorHandler, frameworkErrorHandler, installErrorHandlers, JSON_BODY_SETTING, remoteRpcs } from "./errors.js";
import { buildOpenApi, protoDocsOf } from "./openapi.js";
import { headerForwarder } from "./transcode/forward-headers.js";
import { registerRestRoutes, type RestService } from "./transcode/register.js";
import { DEFAULT_RESPONSE_OPTIONS, sendJsonText } from "./transcode/response.js";
import { rawBodyReader } from "./transcode/request.js";

export interface GatewayOptions {
  /**
   * Each service and the Connect transport that reaches it (in-process or HTTP); `rawBodyLimit`, the service's own
   * limit for a raw-content body (a rule whose body is a string or bytes field), e.g. gov.limits.config-content.
   */
  services: RestService[];
  logger: Logger;
  /**
   * Body limits: `maxJsonBody` (gov.limits.json-body, or `maxJsonBodySetting`) for JSON bodies, and for raw content
   * whose service gives no limit of its own; `maxZipBytes` for an upload's file part; `requestTimeoutMs`
   * (gov.limits.request-timeout, default 60 s): a request must have arrived by then.
   */
  limits: { maxJsonBody: number; maxJsonBodySetting?: string; maxZipBytes: number; requestTimeoutMs?: number };
  /** `gov.security.trusted-proxies`: peers whose `X-Forwarded-For` is believed (see transcode/forward-headers.ts). Default none. */
  trustedProxies?: string[];
  /** `gov.cors.origins`: browser origins allowed on REST, Connect and gRPC-Web. Default none: CORS off (nothing registered). */
  corsOrigins?: readonly string[];
  /** `gov.sse.heartbeat`: how often an idle SSE watch sends a comment line (default 15 s). */
  sseHeartbeatMs?: number;
  /** How long a stream may take to start before the client gets 503 (default 10 s; see ResponseOptions.streamStartMs). */
  streamStartMs?: number;
  /** In the all-in-one process: the services' Connect routes, also served on the gateway's port (gRPC needs h2c). */
  connect?: { routes: (router: ConnectRouter) => void; interceptors: Interceptor[]; readMaxBytes?: number };
}

/** Builds the gateway (no listen): the /v1 REST API, /openapi.json, /docs and, optionally, Connect and gRPC-Web. */
export async function buildGateway(options: GatewayOptions): Promise<FastifyInstance> {
  const requestTimeoutMs = options.limits.requestTimeoutMs ?? REQUEST_TIMEOUT.ms;
  const errorLimits = { ...options.limits, requestTimeoutMs };
  const app = fastify({
    // No logger of Fastify's own, and the process logger for every request: see quietFastifyLogging.
    ...quietFastifyLogging(options.logger, "shared"),
    // Each REST route sets its own (see registerRestRoutes); this one holds for any other path that parses a body.
    bodyLimit: options.limits.maxJsonBody,
    routerOptions: { maxParamLength: 2048 },
    // Watches (SSE, Connect streams) never finish on their own; closing must end them rather than wait forever.
    forceCloseConnections: true,
    // A request (headers and body) that has not arrived by then is cut with a 408, checked every second; an idle
    // keep-alive connection is closed by Node's keepAliveTimeout.
    requestTimeout: requestTimeoutMs,
    http: { connectionsCheckingInterval: Math.min(1000, requestTimeoutMs), headersTimeout: Math.min(60_000, requestTimeoutMs) },
    // The router's and Node's own refusals, in the contract's {code, message} shape, never echoing the URL.
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler: clientErrorHandler(requestTimeoutMs),
  }) as unknown as FastifyInstance;
  refuseUnknownExpectations(app.server);

  logListening(app, options.logger);
  // The services whose Connect routes this port does not serve (those it reaches over the network): see remoteRpcs.
  const local = new Set(options.connect ? servicesOf(options.connect.routes).map((s) => s.service.typeName) : []);
  const remote = options.services.map((s) => s.service).filter((service) => !local.has(service.typeName));
  installErrorHandlers(app, errorLimits, remoteRpcs(remote)); // before the scopes below, which inherit it
  await registerCors(app, options.corsOrigins ?? []); // before the scopes below: preflights and CORS headers on every route
  let document: Record<string, unknown> = {};
  await app.register(async (rest) => {
    // Bodies reach the transcoder as raw bytes: the proto rule, not the content type, decides how to read them.
    rest.removeAllContentTypeParsers();
    const reader = rawBodyReader(options.limits.maxJsonBodySetting);
    rest.addContentTypeParser("*", { parseAs: "buffer" }, reader);
    // The same reader for every content type by a RegExp: Fastify remembers which parser a content type gets when it
    // was found by type or RegExp, never when it fell through to "*", so every body paid a Content-Type parse and
    // rendering (~0.4 µs of a config PUT). "*" still takes what no type names (a body without a Content-Type).
    rest.addContentTypeParser(/^/, { parseAs: "buffer" }, reader);
    // "Any content type" includes ones Fastify cannot parse (empty, no subtype), which it would refuse with 415.
    // Only routes that take a body pay for the check; the GET hot path does not.
    rest.addHook("onRoute", (route) => {
      if (route.method === "GET" || route.method === "HEAD") return;
      const own = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
      route.onRequest = [acceptAnyContentType as never, ...own];
    });
    const json = { bytes: options.limits.maxJsonBody, setting: options.limits.maxJsonBodySetting ?? JSON_BODY_SETTING };
    const routes = await registerRestRoutes(rest, options.services, { json, fileSize: options.limits.maxZipBytes }, headerForwarder(options.trustedProxies ?? []), {
      ...DEFAULT_RESPONSE_OPTIONS,
      heartbeatMs: options.sseHeartbeatMs ?? DEFAULT_RESPONSE_OPTIONS.heartbeatMs,
      streamStartMs: options.streamStartMs ?? DEFAULT_RESPONSE_OPTIONS.streamStartMs,
    });
    document = buildOpenApi(routes, { title: "Governance REST API", version: "v1" }, await protoDocsOf(options.services.map((s) => s.service)));
  });

  // Its text and compressed forms are made once: the document never changes while the process runs.
  const documentText = JSON.stringify(document);
  app.get("/openapi.json", { schema: { hide: true } }, (_req, reply) => sendJsonText(reply, documentText, document, DEFAULT_RESPONSE_OPTIONS));
  await app.register(swagger, { mode: "static", specification: { document: document as never } });
  await app.register(swaggerUi, { routePrefix: "/docs" });

  if (options.connect) {
    // The same RPC scope as a service's own listener, minus gRPC (it needs h2c). The message limit is the process's
    // (the largest upload or request its modules take), as on its gRPC port.
    await registerRpcs(app, {
      routes: options.connect.routes,
      interceptors: options.connect.interceptors,
      readMaxBytes: options.connect.readMaxBytes ?? options.limits.maxZipBytes + 1024,
      readMaxBytesSetting: "gov.limits.zip-upload, plus 1 KiB",
      requestTimeoutMs,
      trustedProxies: options.trustedProxies,
      protocols: { grpc: false, grpcWeb: true, connect: true },
    });
  }
  return app;
}

const MEDIA_TYPE = /^[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+\s*(;|$)/;

/** A Content-Type that is not a media type reads as application/octet-stream: the body is still the raw content. */
function acceptAnyContentType(req: FastifyRequest, _reply: unknown, done: () => void): void {
  const type = req.headers["content-type"];
  if (type !== undefined && !MEDIA_TYPE.test(type)) req.headers["content-type"] = "application/octet-stream";
  done();
}
