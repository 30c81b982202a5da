import type { Transport } from "@connectrpc/connect";

/** The header that tells the registry which service is asking (the topology is built from it). */
export const CONSUMER_HEADER = "X-Gov-Consumer";
/** Its namespace: the registry records the edge there, whichever namespace the discovered service is in. */
export const CONSUMER_NAMESPACE_HEADER = "X-Gov-Consumer-Namespace";

/** Discovery methods: the calls through which a service finds the services it consumes. */
const DISCOVERY_METHODS = new Set(["WatchInstances", "ListInstances", "ChooseInstance"]);

function withHeader(header: HeadersInit | undefined, consumer: string, namespace: string | undefined): Headers {
  const h = new Headers(header);
  h.set(CONSUMER_HEADER, consumer);
  if (namespace) h.set(CONSUMER_NAMESPACE_HEADER, namespace);
  return h;
}

/**
 * Wraps a transport so that discovery calls carry `X-Gov-Consumer: <consumer>` (and `X-Gov-Consumer-Namespace`). A wrapper rather than a Connect
 * interceptor because the caller may hand over a transport that was built already (interceptors are fixed at
 * creation).
 */
export function withConsumerHeader(transport: Transport, consumer: string, namespace?: string): Transport {
  return {
    unary: (method, signal, timeoutMs, header, input, contextValues) =>
      transport.unary(method, signal, timeoutMs, DISCOVERY_METHODS.has(method.name) ? withHeader(header, consumer, namespace) : header, input, contextValues),
    stream: (method, signal, timeoutMs, header, input, contextValues) =>
      transport.stream(method, signal, timeoutMs, DISCOVERY_METHODS.has(method.name) ? withHeader(header, consumer, namespace) : header, input, contextValues),
  };
}
