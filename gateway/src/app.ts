import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, Interceptor, Transport } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import multipart from "@fastify/multipart";
import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyServerFactory } from "fastify";
import type { Logger } from "@gov/service-kit";
import { installErrorHandlers } from "./errors.js";
import { buildOpenApi } from "./openapi.js";
import { registerRestRoutes } from "./transcode/register.js";

export interface GatewayOptions {
  /** Each service and the Connect transport that reaches it (in-process or HTTP). */
  services: { service: DescService; transport: Transport }[];
  logger: Logger;
  limits: { maxJsonBody: number; maxZipBytes: number };
  /** In the all-in-one process: the services' Connect routes, also served on the gateway's port. */
  connect?: { routes: (router: ConnectRouter) => void; interceptors: Interceptor[] };
  serverFactory?: FastifyServerFactory;
}

/** Builds the gateway (no listen): the /v1 REST API, /openapi.json, /docs and, optionally, Connect/gRPC. */
export async function buildGateway(options: GatewayOptions): Promise<FastifyInstance> {
  const app = fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.limits.maxJsonBody,
    routerOptions: { maxParamLength: 2048 },
    serverFactory: options.serverFactory,
  }) as unknown as FastifyInstance;

  installErrorHandlers(app); // before the scopes below, which inherit it
  let document: Record<string, unknown> = {};
  await app.register(async (rest) => {
    // Bodies reach the transcoder as raw bytes: the proto rule, not the content type, decides how to read them.
    rest.removeAllContentTypeParsers();
    rest.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    await rest.register(multipart, { limits: { fileSize: options.limits.maxZipBytes, files: 1, fields: 20, parts: 21 }, throwFileSizeLimit: true });
    const routes = registerRestRoutes(rest, options.services);
    document = buildOpenApi(routes, { title: "Governance REST API", version: "v1" });
  });

  app.get("/openapi.json", { schema: { hide: true } }, async () => document);
  await app.register(swagger, { mode: "static", specification: { document: document as never } });
  await app.register(swaggerUi, { routePrefix: "/docs" });

  if (options.connect) {
    await app.register(fastifyConnectPlugin, { routes: options.connect.routes, interceptors: options.connect.interceptors, grpc: true, grpcWeb: true, connect: true, readMaxBytes: options.limits.maxZipBytes + 1024 });
  }
  return app;
}
