import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "./logger.js";

export interface ConnectRoutesOptions {
  routes: (router: ConnectRouter) => void;
  interceptors?: Interceptor[];
  logger: Logger;
  /** Largest request message accepted, in bytes. */
  readMaxBytes?: number;
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

async function connectApp(options: ConnectRoutesOptions, http2: boolean): Promise<FastifyInstance> {
  const app = fastify({
    http2: http2 as false, // one code path for both; fastify's overloads want a literal
    loggerInstance: options.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // Streams never finish on their own, and Node 20 does not end open h2 sessions on close(): without this,
    // shutdown would wait for clients forever.
    forceCloseConnections: true,
  });
  await app.register(fastifyConnectPlugin, { routes: options.routes, interceptors: options.interceptors, readMaxBytes: options.readMaxBytes });
  return app as unknown as FastifyInstance;
}

const urlOf = (app: FastifyInstance, host: string) => `http://${host}:${(app.server.address() as { port: number }).port}`;

/** Serves a service's Connect routes: Connect + gRPC-Web on `port` (HTTP/1.1), gRPC on `grpcPort` (h2c). */
export async function serveConnect(options: ServeConnectOptions): Promise<ConnectServer> {
  const host = options.host ?? "127.0.0.1";
  const h1 = await connectApp(options, false);
  const h2 = await connectApp(options, true);
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
