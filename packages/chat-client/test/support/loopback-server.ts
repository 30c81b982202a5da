/** A real `node:http` server on 127.0.0.1 (port 0) whose handler each test sets; it records every request. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
  /** Resolves when the server sees this request's socket close. */
  socketClosed: Promise<void>;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

export interface LoopbackServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  requests: RecordedRequest[];
  handle(handler: Handler): void;
  close(): Promise<void>;
}

export async function startLoopbackServer(): Promise<LoopbackServer> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  let handler: Handler = (_req, res) => res.writeHead(500).end("no handler");
  const server = createServer((req, res) => {
    const socketClosed = new Promise<void>((resolve) => req.socket.once("close", () => resolve()));
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      const body = Buffer.concat(parts).toString("utf8");
      requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body, socketClosed });
      handler(req, res, body);
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    handle: (h) => (handler = h),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Rejects after `ms` unless `promise` settled first, so a missing event fails fast instead of hanging. */
export function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  return Promise.race([promise, sleep(ms).then(() => Promise.reject(new Error(`timed out after ${ms} ms waiting for ${what}`)))]);
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A chat chunk as providers send it, with the fields tests care about. */
export function chunk(delta: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1700000000,
    model: "test-model",
    choices: [{ index: 0, delta, finish_reason: null }],
    usage: null,
    ...extra,
  };
}

export const sse = (data: unknown) => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;
