import proxyAddr from "@fastify/proxy-addr";
import type { FastifyRequest } from "fastify";

/**
 * The one rule for what crosses from a REST request to the services (as Connect request headers, the same ones a
 * Connect or gRPC client would send itself):
 *
 * - `authorization`: the caller's token; the services authenticate it (contract §7), never the gateway;
 * - `x-gov-consumer`: the calling application's name;
 * - `x-request-id`: correlation id for logs;
 * - `traceparent`, `tracestate`: W3C trace context;
 * - `x-forwarded-for`: computed, never copied: see {@link clientAddresses}.
 *
 * Nothing else crosses (no cookies, no hop-by-hop or content headers): a service must not depend on how the call
 * reached it.
 */
export const FORWARDED_HEADERS = ["authorization", "x-gov-consumer", "x-request-id", "traceparent", "tracestate"] as const;

/** Builds the headers a REST request passes to the services. */
export type HeaderForwarder = (req: FastifyRequest) => Record<string, string>;

/**
 * The `x-forwarded-for` a service sees: `client, proxy…, peer`, each entry vouched for, so the first one is the
 * client's address (the audit log's `ip`). A client's own `x-forwarded-for` is believed only when the direct peer is
 * one of `trustedProxies` (addresses or CIDRs, `gov.security.trusted-proxies`), and then only as far back as the
 * chain stays within trusted proxies. With no trusted proxies (the default) it is the peer's address alone.
 */
export function clientAddresses(trustedProxies: readonly string[]): (req: FastifyRequest) => string | undefined {
  if (trustedProxies.length === 0) return (req) => req.raw.socket.remoteAddress;
  const trust = proxyAddr.compile([...trustedProxies]);
  return (req) => {
    if (req.raw.socket.remoteAddress === undefined) return undefined; // the client is already gone
    return proxyAddr.all(req.raw, trust).reverse().join(", ");
  };
}

export function headerForwarder(trustedProxies: readonly string[]): HeaderForwarder {
  const forwardedFor = clientAddresses(trustedProxies);
  return (req) => {
    const out: Record<string, string> = {};
    for (const name of FORWARDED_HEADERS) {
      const value = req.headers[name];
      if (typeof value === "string") out[name] = value;
    }
    const chain = forwardedFor(req);
    if (chain !== undefined) out["x-forwarded-for"] = chain;
    return out;
  };
}

/**
 * Checks `gov.security.trusted-proxies` entries at startup (a typo must not silently trust nobody, or everybody).
 * Accepts what proxy-addr accepts: an IPv4/IPv6 address, a CIDR, or `loopback`, `linklocal`, `uniquelocal`.
 */
export function parseTrustedProxies(value: string): string[] {
  const list = value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  for (const entry of list) {
    try {
      proxyAddr.compile(entry);
    } catch {
      throw new Error(`"${entry}" is not an IP address, a CIDR (10.0.0.0/8) or one of loopback, linklocal, uniquelocal`);
    }
  }
  return list;
}
