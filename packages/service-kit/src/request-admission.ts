import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";

/**
 * Time one turn of the event loop spends starting requests before the rest wait for the next turn. Starting a call
 * is not free (a watch: ~0.3–0.8 ms of decoding, signals, a first store read and a first message), and an HTTP/2
 * connection delivers as many new streams in one read as its client sent: 3,000 `WatchConfig` streams from one
 * grpc-js client held the loop 1.5–2.5 s (every other request, health probes included, waited), and a bad token did
 * not make it much cheaper. Started a few milliseconds' worth at a time, the other work of the process runs in between.
 */
export const ADMISSION_MS_PER_TURN = 10;

/**
 * Requests a turn starts before it looks at the clock: the cost of a normal turn under load (`wrk -c32`: 32 requests)
 * stays one counter per request.
 */
const UNTIMED_PER_TURN = 16;

type AnyRequest = IncomingMessage | Http2ServerRequest;
type AnyResponse = ServerResponse | Http2ServerResponse;
type RequestListener = (req: AnyRequest, res: AnyResponse) => void;

/**
 * Makes `server`'s request listeners start requests in turns: while this turn has spent less than `msPerTurn` since
 * its first request, a request starts at once; later ones wait, first come first served, for the next turns' check
 * phase, which starts them `msPerTurn` at a time. A request waiting is only a request not read yet: its socket or
 * stream is already open, so nothing is buffered that the connection and stream limits do not bound already. Call
 * it after every other wrapper of the request listeners (issueRequestIds), so that the whole of a request waits.
 */
export function admitInTurns(
  server: { listeners(event: "request"): Function[]; removeAllListeners(event: "request"): unknown; on(event: "request", l: RequestListener): unknown },
  msPerTurn = ADMISSION_MS_PER_TURN,
): void {
  const inner = server.listeners("request") as RequestListener[];
  server.removeAllListeners("request");
  admitting.add(server);
  const start = (req: AnyRequest, res: AnyResponse) => {
    for (const listener of inner) listener.call(server, req, res);
  };
  let startedThisTurn = 0;
  let turnBegan = 0;
  const waiting: [AnyRequest, AnyResponse][] = [];
  const endTurn = () => {
    startedThisTurn = 0;
  };
  const startWaiting = () => {
    const began = performance.now();
    do start(...waiting.shift()!);
    while (waiting.length > 0 && performance.now() - began < msPerTurn);
    if (waiting.length > 0) setImmediate(startWaiting);
  };
  server.on("request", (req, res) => {
    if (startedThisTurn++ === 0) {
      turnBegan = performance.now();
      setImmediate(endTurn);
    }
    if (waiting.length === 0 && (startedThisTurn <= UNTIMED_PER_TURN || performance.now() - turnBegan < msPerTurn)) return start(req, res);
    if (waiting.push([req, res]) === 1) setImmediate(startWaiting);
  });
}

const admitting = new WeakSet<object>();

/** Whether {@link admitInTurns} wraps `server`'s request listeners (every listener of a built process is). */
export function admitsInTurns(server: object): boolean {
  return admitting.has(server);
}
