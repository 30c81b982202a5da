import proxyAddr from "@fastify/proxy-addr";
import type { SettingDef } from "@gov/settings";
import type { FastifyInstance, FastifyRequest } from "fastify";

/**
 * The `x-forwarded-for` a service sees: `client, proxy…, peer`, each entry vouched for, so the first one is the
 * client's address (the audit log's `ip`). A client's own `x-forwarded-for` is believed only when the direct peer is
 * one of `trustedProxies` (addresses or CIDRs, `gov.security.trusted-proxies`), and then only as far back as the
 * chain stays within trusted proxies. With no trusted proxies (the default) it is the peer's address alone.
 */
export function clientAddresses(trustedProxies: readonly string[]): (req: FastifyRequest) => string | undefined {
  if (trustedProxies.length === 0) return (req) => req.raw.socket?.remoteAddress;
  const trust = proxyAddr.compile([...trustedProxies]);
  return (req) => {
    if (req.raw.socket?.remoteAddress === undefined) return undefined; // the client is already gone
    return proxyAddr.all(req.raw, trust).reverse().join(", ");
  };
}

/**
 * Every request of `scope` reaches its handlers with `x-forwarded-for` recomputed by {@link clientAddresses}: on the
 * Connect, gRPC-Web and gRPC listeners a client could otherwise send any address and be believed, exactly what the
 * REST gateway refuses to pass on.
 */
export function vouchForwardedFor(scope: FastifyInstance, trustedProxies: readonly string[]): void {
  const forwardedFor = clientAddresses(trustedProxies);
  scope.addHook("onRequest", (req, _reply, done) => {
    const chain = forwardedFor(req);
    if (chain === undefined) delete req.raw.headers["x-forwarded-for"];
    else req.raw.headers["x-forwarded-for"] = chain;
    done();
  });
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

export const trustedProxiesSetting = {
  name: "gov.security.trusted-proxies",
  parse: parseTrustedProxies,
  default: [],
  doc: "proxies (addresses or CIDRs, comma-separated) whose `X-Forwarded-For` is believed; none by default",
} as SettingDef<string[]>;
