import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { connectUnaryClient } from "./connect-unary-client.js";

export interface RemoteTransportOptions {
  /**
   * Deadline of unary calls that set no `timeoutMs` of their own, in milliseconds; sent to the service (as
   * `connect-timeout-ms`), so both sides give up. Streams get none: watches and keepalives are meant to stay open
   * and end when the caller aborts them. 0 = no default. Default 10 000.
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
}

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * A remote service over the binary Connect protocol. Unary calls (through {@link connectUnaryClient}) and
 * server-streaming calls use pooled HTTP/1.1 connections to `baseUrl` (faster than HTTP/2 in Node for small calls); client and bidi streams use HTTP/2 when
 * `http2BaseUrl` is given. Unary calls get a default deadline.
 */
export function remoteTransport(baseUrl: string, opts: RemoteTransportOptions = {}): Transport {
  const h1 = createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true, interceptors: opts.interceptors });
  const h2 = opts.http2BaseUrl
    ? createConnectTransport({ baseUrl: opts.http2BaseUrl, httpVersion: "2", useBinaryFormat: true, interceptors: opts.interceptors })
    : h1;
  const defaultTimeoutMs = (opts.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS) || undefined;
  const unary = connectUnaryClient(baseUrl, opts.interceptors); // the lean path for the hot case, see its comment
  return {
    unary: (method, signal, timeoutMs, header, input, contextValues) =>
      unary(method, signal, timeoutMs ?? defaultTimeoutMs, header, input, contextValues) as never,
    stream: (method, signal, timeoutMs, header, input, contextValues) =>
      (method.methodKind === "server_streaming" ? h1 : h2).stream(method, signal, timeoutMs, header, input, contextValues),
  };
}
