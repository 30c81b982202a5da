import http from "node:http";
import http2 from "node:http2";
import type { Socket } from "node:net";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "./logger.js";

export interface ServeConnectOptions {
  routes: (router: ConnectRouter) => void;
  interceptors?: Interceptor[];
  port: number;
  host?: string;
  logger: Logger;
  /** Largest request message accepted, in bytes. */
  readMaxBytes?: number;
}

export interface ConnectServer {
  app: FastifyInstance;
  /** `http://host:port` */
  url: string;
  close(): Promise<void>;
}

/**
 * One plaintext port for every Connect client: HTTP/1.1 (Connect, gRPC-Web) and h2c (gRPC, Connect over h2).
 * Node cannot serve both on one plaintext socket by itself, so the first bytes are sniffed: the HTTP/2
 * connection preface starts with "PRI"; anything else is HTTP/1.1.
 */
export function dualProtocolServer(handler: http.RequestListener): http.Server {
  const h1 = http.createServer(handler);
  const h2 = http2.createServer(handler as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void);
  const h1Listeners = h1.listeners("connection") as ((s: Socket) => void)[];
  h1.removeAllListeners("connection");
  h1.on("connection", (socket: Socket) => {
    socket.once("readable", () => {
      const head: Buffer | null = socket.read(3) ?? socket.read();
      if (head) socket.unshift(head);
      if (head?.toString("latin1").startsWith("PRI")) h2.emit("connection", socket);
      else for (const l of h1Listeners) l.call(h1, socket);
    });
  });
  // Node 20 does not close h2 sessions on server.close(); do it ourselves or shutdown hangs.
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  const close = h1.close.bind(h1);
  h1.close = ((cb?: (err?: Error) => void) => {
    for (const s of sessions) s.close();
    h2.close();
    h1.closeAllConnections();
    return close(cb);
  }) as typeof h1.close;
  h1.keepAliveTimeout = 72_000;
  return h1;
}

/** Serves Connect, gRPC and gRPC-Web for the given routes on one port. */
export async function serveConnect(options: ServeConnectOptions): Promise<ConnectServer> {
  const app = fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    serverFactory: (handler) => dualProtocolServer(handler),
  });
  await app.register(fastifyConnectPlugin, {
    routes: options.routes,
    interceptors: options.interceptors,
    readMaxBytes: options.readMaxBytes,
    grpc: true,
    grpcWeb: true,
    connect: true,
  });
  const host = options.host ?? "127.0.0.1";
  await app.listen({ port: options.port, host });
  const addr = app.server.address();
  const port = typeof addr === "object" && addr ? addr.port : options.port;
  return { app: app as unknown as FastifyInstance, url: `http://${host}:${port}`, close: () => app.close() };
}
