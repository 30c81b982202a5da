import { Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { connectUnaryClient } from "./connect-unary-client.js";
import { isReadOnly, outcomeUnknown } from "./call-outcome.js";

export interface RemoteTransportOptions {
  /**
   * Deadline of unary calls that set no `timeoutMs` of their own, in milliseconds; sent to the service (as
   * `connect-timeout-ms`), so both sides give up. Retries of a read share it. Streams get none: watches and
   * keepalives are meant to stay open and end when the caller aborts them. 0 = no default. Default 10 000.
   */
  defaultTimeoutMs?: number;
  /**
   * The service's h2c (HTTP/2) URL, usually its `grpc-port`. Client- and bidi-streaming calls go there: over HTTP/1.1
   * a request body cannot stream while the response is read, so a bidi call could not interleave. Unset: they use
   * `baseUrl` over HTTP/1.1 (half duplex: the whole request, then the response).
   */
  http2BaseUrl?: string;
  /** Client interceptors (auth, tracing) run on every call. */
  interceptors?: Interceptor[];
  /** The service's name in the errors it causes (`registry` → "registry service unreachable at …"). */
  serviceName?: string;
  /**
   * How many more times a read (`NO_SIDE_EFFECTS`) is sent when the connection was refused or lost before an answer
   * (a restarting service, a pooled connection the service just closed). Writes are never re-sent. Default 2.
   */
  readRetries?: number;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_READ_RETRIES = 2;
/** Pause before each retry: quick, since a reset pooled connection is replaced at once; a refused one may need a moment. */
const RETRY_PAUSE_MS = [20, 100, 250];

/** Node errors that prove the request never reached the service (no connection was made). */
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);
/** Node errors of a connection lost after the request may have been sent. */
const LOST = new Set(["ECONNRESET", "EPIPE", "ETIMEDOUT", "ERR_STREAM_PREMATURE_CLOSE"]);

type ConnectionFailure = { kind: "not-sent" | "lost"; detail: string };

/** Whether `err` is a connection failure (not an answer of the service), and which kind; walks the `cause` chain. */
function connectionFailure(err: unknown): ConnectionFailure | undefined {
  const seen = new Set<unknown>();
  for (let e = err; e instanceof Error && !seen.has(e); e = e.cause) {
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code !== "string") continue;
    if (NOT_SENT.has(code)) return { kind: "not-sent", detail: e.message };
    if (LOST.has(code)) return { kind: "lost", detail: e.message };
  }
  return undefined;
}

/**
 * A remote service over the binary Connect protocol. Unary calls (through {@link connectUnaryClient}) and
 * server-streaming calls use pooled HTTP/1.1 connections to `baseUrl` (faster than HTTP/2 in Node for small calls);
 * client and bidi streams use HTTP/2 when `http2BaseUrl` is given. Unary calls get a default deadline. When the service
 * cannot be reached, a read is retried a few times within its deadline; then the caller gets `unavailable` naming the
 * service and its URL — or, for a write whose connection was lost after it was sent, `deadline_exceeded` saying the
 * outcome is unknown.
 */
export function remoteTransport(baseUrl: string, opts: RemoteTransportOptions = {}): Transport {
  const h1 = createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true, interceptors: opts.interceptors });
  const h2 = opts.http2BaseUrl
    ? createConnectTransport({ baseUrl: opts.http2BaseUrl, httpVersion: "2", useBinaryFormat: true, interceptors: opts.interceptors })
    : h1;
  const defaultTimeoutMs = (opts.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS) || undefined;
  const unary = connectUnaryClient(baseUrl, opts.interceptors); // the lean path for the hot case, see its comment
  const readRetries = opts.readRetries ?? DEFAULT_READ_RETRIES;
  const service = opts.serviceName ? `${opts.serviceName} service` : "service";

  /** The error a caller sees once a connection failure is final. */
  const explain = (failure: ConnectionFailure, err: unknown, read: boolean, attempts: number): ConnectError => {
    const tries = attempts > 1 ? ` (${attempts} attempts)` : "";
    if (failure.kind === "not-sent" || read) {
      const written = read ? "" : "; nothing was sent";
      return new ConnectError(`${service} unreachable at ${baseUrl}: ${failure.detail}${tries}${written}; retry when it is back`, Code.Unavailable, undefined, undefined, err);
    }
    return new ConnectError(
      `the ${service} at ${baseUrl} closed the connection before answering (${failure.detail}), so ${outcomeUnknown("the call")}`,
      Code.DeadlineExceeded,
      undefined,
      undefined,
      err,
    );
  };

  /**
   * A stream's messages; if the connection is lost midway (the service died or restarted), the caller is told that —
   * `unavailable`, naming the service, to open it again — instead of a bare `aborted` "read ECONNRESET".
   */
  async function* endExplained<T>(messages: AsyncIterable<T>, signal: AbortSignal | undefined): AsyncIterable<T> {
    try {
      yield* messages;
    } catch (err) {
      const failure = signal?.aborted ? undefined : connectionFailure(err);
      if (!failure) throw err;
      throw new ConnectError(`the ${service} at ${baseUrl} ended the stream without finishing it (${failure.detail}): open it again when the service is back`, Code.Unavailable, undefined, undefined, err);
    }
  }

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const timeout = timeoutMs ?? defaultTimeoutMs;
      const deadline = timeout === undefined ? undefined : Date.now() + timeout;
      const read = isReadOnly(method);
      for (let attempt = 1; ; attempt++) {
        // The first attempt gets the whole timeout (what its deadline message names), a retry what is left of it.
        const left = deadline === undefined || attempt === 1 ? timeout : Math.max(1, deadline - Date.now());
        try {
          return (await unary(method, signal, left, header, input, contextValues)) as never;
        } catch (err) {
          const failure = signal?.aborted ? undefined : connectionFailure(err);
          if (!failure) throw err;
          const pause = RETRY_PAUSE_MS[Math.min(attempt - 1, RETRY_PAUSE_MS.length - 1)];
          const retry = read && attempt <= readRetries && (deadline === undefined || Date.now() + pause < deadline);
          if (!retry) throw explain(failure, err, read, attempt);
          await new Promise((r) => setTimeout(r, pause));
        }
      }
    },
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      let res;
      try {
        res = await (method.methodKind === "server_streaming" ? h1 : h2).stream(method, signal, timeoutMs, header, input, contextValues);
      } catch (err) {
        // A watch that cannot start: the service is unreachable (not retried here; clients re-open their watches).
        const failure = signal?.aborted ? undefined : connectionFailure(err);
        throw failure ? explain(failure, err, true, 1) : err;
      }
      return { ...res, message: endExplained(res.message, signal) } as never;
    },
  };
}
