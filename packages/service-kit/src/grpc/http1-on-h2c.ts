import type { Http2Server } from "node:http2";
import type { Socket } from "node:net";
import { excerpt } from "../excerpt.js";

/** What every HTTP/2 client sends first on a cleartext connection (RFC 9113 §3.4). */
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** The longest method name taken for HTTP/1.x (the longest registered one, UPDATEREDIRECTREF, has 17 characters). */
const MAX_METHOD = 20;

/**
 * failed_precondition, at the contract's status for it (§3: 412; Connect's own table says 400). Neither of the HTTP
 * statuses that name the case fits better: 426 Upgrade Required must come with an `Upgrade` header naming a protocol
 * this connection could switch to, and an `Upgrade: h2c` would invite the HTTP/1.1 upgrade curl's `--http2` sends,
 * which Node's h2c server does not do (its client would come back with the same request); 505 is outside the
 * contract's table, which every listener answers from. The same refusal the other way round — a bidirectional
 * stream sent over HTTP/1.1 — is 412 `failed_precondition` too (full-duplex.ts).
 */
const STATUS_LINE = "HTTP/1.1 412 Precondition Failed";
const CODE = "failed_precondition";

/** After its answer, how long and how much of what an HTTP/1.x client still sends (headers, a body) is read and dropped. */
const LINGER_MS = 1000;
const LINGER_BYTES = 1024 * 1024;

/**
 * Emitted by the server, with {@link Http1Answered}, for each HTTP/1.x request answered 412 here. Such a request never
 * becomes one of the server's requests, so without it the access log (process-runner.ts) would not see it, as it sees
 * the HTTP/1.1 listener's refusals of what is not HTTP through `clientError`.
 */
export const HTTP1_ANSWERED = "http1Answered";

/** What is known of a request answered 412: its method, and its target as far as the first bytes held it. */
export interface Http1Answered {
  method: string;
  url: string;
  remoteAddress?: string;
}

/** The HTTP/1.1 listener of the same process, when known: its URL and what it serves ("REST, Connect and gRPC-Web"). */
export type Http1Listener = () => { url: string; serves: string } | undefined;

type FirstBytes = "h2" | "http1" | "more" | "neither";

/** A byte of an HTTP token (RFC 9110 §5.6.2): what a method name is made of. */
const isToken = (b: number) => (b >= 0x61 && b <= 0x7a) || (b >= 0x41 && b <= 0x5a) || (b >= 0x30 && b <= 0x39) || "!#$%&'*+-.^_`|~".includes(String.fromCharCode(b));

/**
 * What a connection's first bytes are: the HTTP/2 preface (or a part of it, so far: `more`), the start of an HTTP/1.x
 * request line — a method, a space and a target (`GET /v1/…`) — or neither (TLS's ClientHello, noise), which the
 * HTTP/2 session answers as HTTP/2 answers any bad preface: a GOAWAY, and the connection closed.
 */
export function firstBytes(buf: Buffer): FirstBytes {
  const n = Math.min(buf.length, PREFACE.length);
  if (buf.compare(PREFACE, 0, n, 0, n) === 0) return n === PREFACE.length ? "h2" : "more";
  let i = 0;
  while (i < buf.length && i <= MAX_METHOD && isToken(buf[i])) i++;
  if (i === buf.length) return i <= MAX_METHOD ? "more" : "neither";
  if (i === 0 || i > MAX_METHOD || buf[i] !== 0x20) return "neither";
  if (i + 1 === buf.length) return "more";
  return buf[i + 1] > 0x20 && buf[i + 1] < 0x7f ? "http1" : "neither";
}

/**
 * A plain HTTP/1.1 request (`curl http://localhost:9090/v1/namespaces`) sent to an h2c listener got Node's HTTP/2
 * answer to a bad preface, a binary SETTINGS + GOAWAY (curl: "Received HTTP/0.9 when not allowed"). Node's h2c server
 * has no hook for it (`unknownProtocol` is for TLS's ALPN only), and once its session has the socket, nghttp2 reads
 * the bytes in C++. So the session is made only once the first bytes are known: Node's own `connection` listener
 * (which makes it) is called when they begin with the HTTP/2 preface — the bytes read so far go back onto the socket,
 * where the session reads them first (Node 20 reads a socket's buffered data into a new session) — and an HTTP/1.x
 * request line gets `{code, message}` JSON with the way to the HTTP/1.1 port, then the connection is closed. An HTTP/2
 * connection pays one look at its first chunk, which holds the 24-byte preface (a first chunk shorter than that waits
 * for the rest, at most `timeoutMs`, the idle bound of a session). Call it before the server listens and before any
 * other `connection` listener is added: the listeners present then are the ones deferred.
 */
export function answerHttp1OnH2c(server: Http2Server, options: { http1Listener?: Http1Listener; timeoutMs: number }): void {
  const sessionMakers = server.listeners("connection") as ((socket: Socket) => void)[];
  server.removeAllListeners("connection");
  /** Sockets whose first bytes have not all come yet, each with how to hand it to the HTTP/2 session as it is. */
  const waiting = new Map<Socket, () => void>();
  const ignoreError = () => {}; // a reset before the first bytes: nothing to answer, and 'close' follows

  const handOver = (socket: Socket, bytes: Buffer | undefined) => {
    socket.pause(); // flowing, the bytes put back would be emitted as 'data' to no one
    if (bytes) socket.unshift(bytes);
    for (const make of sessionMakers) make.call(server, socket);
    socket.off("error", ignoreError); // the session has its own handler now
  };

  server.on("connection", (socket: Socket) => {
    let got: Buffer | undefined;
    const settle = () => {
      waiting.delete(socket);
      socket.off("data", onData);
      socket.off("timeout", onTimeout);
      socket.setTimeout(0);
    };
    const onData = (chunk: Buffer) => {
      got = got ? Buffer.concat([got, chunk]) : chunk;
      const kind = firstBytes(got);
      if (kind === "more") return;
      settle();
      if (kind === "http1") answerHttp1(server, socket, got, options.http1Listener?.());
      else handOver(socket, got);
    };
    const onTimeout = () => {
      settle();
      socket.destroy();
    };
    socket.on("error", ignoreError);
    socket.on("data", onData);
    socket.setTimeout(options.timeoutMs, onTimeout);
    socket.once("close", () => waiting.delete(socket));
    waiting.set(socket, () => {
      settle();
      if (!socket.destroyed) handOver(socket, got);
    });
  });

  // Closing the server (a shutdown) hands the connections still waiting to HTTP/2 as they are: their sessions are made
  // now, so the shutdown sends them its GOAWAY like every other session's, instead of waiting for their first bytes.
  const close = server.close;
  server.close = function (this: Http2Server, callback?: (err?: Error) => void) {
    for (const handOverNow of [...waiting.values()]) handOverNow();
    return close.call(this, callback);
  } as typeof server.close;
}

function answerHttp1(server: Http2Server, socket: Socket, got: Buffer, http1: ReturnType<Http1Listener>): void {
  const where = http1 ? `send ${http1.serves} requests over HTTP/1.1 to port ${new URL(http1.url).port} (${http1.url})` : "send REST, Connect and gRPC-Web requests over HTTP/1.1 to the main port (PORT, or a service's own port)";
  const message = `this port speaks HTTP/2 only (gRPC): ${where}; for gRPC use an HTTP/2 client (e.g. grpcurl -plaintext, buf curl --http2-prior-knowledge; Connect over HTTP/2: curl --http2-prior-knowledge)`;
  const body = JSON.stringify({ code: CODE, message });
  const head = got.subarray(0, 5).toString("latin1") === "HEAD ";
  // Told once per answered request (each closes its connection), never per chunk: as many access-log lines as the
  // HTTP/1.1 listener writes for the connections it refuses. Before the socket ends, while it still knows its peer; a
  // target the first bytes hold only part of is marked cut (`/…`).
  const line = got.subarray(0, 2 + MAX_METHOD + 200).toString("latin1");
  const [method, target = ""] = line.split(/[ \r\n]/, 2);
  const partial = line.length === method.length + 1 + target.length;
  server.emit(HTTP1_ANSWERED, { method, url: excerpt(partial ? `${target}…` : target), remoteAddress: socket.remoteAddress } satisfies Http1Answered);
  socket.end(`${STATUS_LINE}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${head ? "" : body}`);
  // What the client still sends (the rest of its headers, a body) is read and dropped for a moment: closed with unread
  // bytes, the socket would be reset, and a client still sending a body could lose the answer with it. A client that
  // reads the answer closes its side, which closes the socket; one that goes on sending is cut off.
  let dropped = got.length;
  socket.on("data", (chunk: Buffer) => {
    if ((dropped += chunk.length) > LINGER_BYTES) socket.destroy();
  });
  const cut = setTimeout(() => socket.destroy(), LINGER_MS);
  socket.once("close", () => clearTimeout(cut));
}
