import { clientAddresses } from "@gov/service-kit";
import type { FastifyRequest } from "fastify";

/**
 * The one rule for what crosses from a REST request to the services (as Connect request headers, the same ones a
 * Connect or gRPC client would send itself):
 *
 * - `authorization`: the caller's token; the services authenticate it (contract §7), never the gateway;
 * - `x-gov-consumer`: the calling application's name; `x-gov-consumer-namespace`: its namespace, when it discovers
 *   services of another one (both feed the topology);
 * - `x-request-id`: correlation id for logs;
 * - `traceparent`, `tracestate`: W3C trace context;
 * - `x-forwarded-for`: computed, never copied: see `clientAddresses` (service-kit), which every Connect listener applies too.
 *
 * Nothing else crosses (no cookies, no hop-by-hop or content headers): a service must not depend on how the call
 * reached it.
 */
export const FORWARDED_HEADERS = ["authorization", "x-gov-consumer", "x-gov-consumer-namespace", "x-request-id", "traceparent", "tracestate"] as const;

/** Builds the headers a REST request passes to the services. */
export type HeaderForwarder = (req: FastifyRequest) => Record<string, string>;

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
