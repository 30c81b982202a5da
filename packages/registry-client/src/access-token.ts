import type { Transport } from "@connectrpc/connect";

/** Where an access token comes from: a fixed one, or a function asked before every call (one that refreshes). */
export type AccessTokenSource = string | (() => string | Promise<string>);

/**
 * Wraps a transport so that every call carries `Authorization: Bearer <token>` (a registry with security on refuses
 * calls without one). A wrapper, as for the consumer header: the caller's transport may be built already. The source is
 * asked before each call, so a function that refreshes keeps long-lived watches and keepalive streams reconnecting
 * with a valid token (the registry ends a stream whose token expired).
 */
export function withAccessToken(transport: Transport, source: AccessTokenSource): Transport {
  const headerWith = async (header: HeadersInit | undefined): Promise<Headers> => {
    const h = new Headers(header);
    h.set("authorization", `Bearer ${typeof source === "string" ? source : await source()}`);
    return h;
  };
  return {
    unary: async (method, signal, timeoutMs, header, input, contextValues) => transport.unary(method, signal, timeoutMs, await headerWith(header), input, contextValues),
    stream: async (method, signal, timeoutMs, header, input, contextValues) => transport.stream(method, signal, timeoutMs, await headerWith(header), input, contextValues),
  };
}
