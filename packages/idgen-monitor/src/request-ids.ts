import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { IdGenError, type IdGenerator } from "@gov/idgen";

/** A client's own `x-request-id` is kept when it is short printable ASCII (it only correlates log lines). */
const CLIENT_ID = /^[\x21-\x7e]{1,128}$/;

/** Thrown (as the cause of a 503 / `unavailable`) when the process cannot issue ids. */
export class IdsUnavailableError extends Error {
  override readonly name = "IdsUnavailableError";
}

/** Why ids cannot be issued, in words an operator and a client can act on. */
export function idsUnavailableMessage(err: unknown): string {
  const why = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  // Only a lost lease stops the generators for good; a segment chain waiting for its prefetch or a clock that stepped
  // back are passing states, and telling the operator to restart a healthy process would mislead.
  if (err instanceof Error && /^MachineId/.test(err.name)) {
    return `this process cannot issue ids (${why}): its generators stopped because the machine-id lease could not be renewed in time; retry against another instance, and restart this one once its store is reachable`;
  }
  return `this process could not issue an id just now (${why}): retry`;
}

/** `generator.nextIdAsString()`, with a library failure turned into {@link IdsUnavailableError}. */
export function nextIdOf(generator: IdGenerator): () => string {
  return () => {
    try {
      return generator.nextIdAsString();
    } catch (err) {
      if (err instanceof IdGenError) throw new IdsUnavailableError(idsUnavailableMessage(err), { cause: err });
      throw err;
    }
  };
}

type AnyRequest = IncomingMessage | Http2ServerRequest;
type AnyResponse = ServerResponse | Http2ServerResponse;
type RequestListener = (req: AnyRequest, res: AnyResponse) => void;

/**
 * Gives every request on `server` an id from the generator before the framework sees it: the client's valid
 * `x-request-id`, or a new one written into the request's headers (so the gateway forwards it to the services and a
 * Fastify `genReqId` that reads the header logs it). It is not echoed in the response: a header set before the
 * framework's own makes Node merge every response header one by one (~3 % of a config GET's CPU, measured); a client
 * that wants to correlate sends its own `x-request-id`. When no id can be issued the request is
 * answered 503 `unavailable` with the reason, and never reaches a handler. One wrapper around the server's own request
 * listener: no per-request hook in the framework.
 */
export function issueRequestIds(
  server: { listeners(event: "request"): Function[]; removeAllListeners(event: "request"): unknown; on(event: "request", l: RequestListener): unknown },
  nextId: () => string,
  /** Told of each request refused for want of an id (the process's outage log: it answers them before any route). */
  onRefused?: (message: string) => void,
): void {
  const inner = server.listeners("request") as RequestListener[];
  server.removeAllListeners("request");
  server.on("request", function (this: unknown, req, res) {
    let id = req.headers["x-request-id"];
    if (typeof id !== "string" || !CLIENT_ID.test(id)) {
      try {
        id = nextId();
      } catch (err) {
        const message = err instanceof IdsUnavailableError ? err.message : idsUnavailableMessage(err);
        res.writeHead(503, { "content-type": "application/json", "retry-after": "1" } as never);
        res.end(JSON.stringify({ code: "unavailable", message }));
        onRefused?.(message);
        return;
      }
      req.headers["x-request-id"] = id;
    }
    for (const listener of inner) listener.call(this, req, res);
  });
}

/** Fastify's `genReqId` for a server wrapped by {@link issueRequestIds}: the id is already in the header. */
export const requestIdFromHeader = (req: { headers: Record<string, unknown> }) => String(req.headers["x-request-id"]);
