import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, Interceptor, Transport } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "@gov/service-kit";
import { installErrorHandlers } from "./errors.js";
import { buildOpenApi } from "./openapi.js";
import { registerRestRoutes } from "./transcode/register.js";

export interface GatewayOptions {
  /** Each service and the Connect transport that reaches it (in-process or HTTP). */
  services: { service: DescService; transport: Transport }[];
  logger: Logger;
  limits: { maxJsonBody: number; maxZipBytes: number };
  /** In the all-in-one process: the services' Connect routes, also served on the gateway's port (gRPC needs h2c). */
  connect?: { routes: (router: ConnectRouter) => void; interceptors: Interceptor[] };
}

/** Builds the gateway (no listen): the /v1 REST API, /openapi.json, /docs and, optionally, Connect and gRPC-Web. */
export async function buildGateway(options: GatewayOptions): Promise<FastifyInstance> {
  const app = fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // A child logger per request costs a third of a bare route's throughput; errors carry req.id themselves.
    childLoggerFactory: (logger) => logger,
    bodyLimit: options.limits.maxJsonBody,
    routerOptions: { maxParamLength: 2048 },
    // Watches (SSE, Connect streams) never finish on their own; closing must end them rather than wait forever.
    forceCloseConnections: true,
  }) as unknown as FastifyInstance;

  installErrorHandlers(app); // before the scopes below, which inherit it
  let document: Record<string, unknown> = {};
  await app.register(async (rest) => {
    // Bodies reach the transcoder as raw bytes: the proto rule, not the content type, decides how to read them.
    rest.removeAllContentTypeParsers();
    rest.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    const routes = await registerRestRoutes(rest, options.services, { fileSize: options.limits.maxZipBytes });
    document = buildOpenApi(routes, { title: "Governance REST API", version: "v1" });
  });

  app.get("/openapi.json", { schema: { hide: true } }, async () => document);
  await app.register(swagger, { mode: "static", specification: { document: document as never } });
  await app.register(swaggerUi, { routePrefix: "/docs" });

  if (options.connect) {
    await app.register(fastifyConnectPlugin, { routes: options.connect.routes, interceptors: options.connect.interceptors, grpc: false, grpcWeb: true, connect: true, readMaxBytes: options.limits.maxZipBytes + 1024 });
  }
  return app;
}
