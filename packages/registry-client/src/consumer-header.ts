import type { Transport } from "@connectrpc/connect";

/** The header that tells the registry which service is asking (the topology is built from it). */
export const CONSUMER_HEADER = "X-Gov-Consumer";
/** Its namespace: the registry records the edge there, whichever namespace the discovered service is in. */
export const CONSUMER_NAMESPACE_HEADER = "X-Gov-Consumer-Namespace";

/** Discovery methods: the calls through which a service finds the services it consumes. */
const DISCOVERY_METHODS = new Set(["WatchInstances", "ListInstances", "ChooseInstance"]);

/**
 * Whether a value can travel in an HTTP header as it is: fetch's Headers takes only characters up to U+00FF (a
 * ByteString), which the registry reads back as they were sent. A service id such as "支付" is valid on the registry
 * but cannot be sent: Headers.set throws a TypeError, which failed every discovery call of the client.
 */
const sendable = (value: string) => !/[^\u0000-\u00ff]/.test(value);

function withHeader(header: HeadersInit | undefined, consumer: string, namespace: string | undefined): Headers {
  const h = new Headers(header);
  // A consumer that cannot be sent is left out: discovery works, and records no topology edge (as an anonymous call).
  if (!sendable(consumer)) return h;
  h.set(CONSUMER_HEADER, consumer);
  // (the client discovers in its own namespace, which the registry takes for the consumer's without the header)
  if (namespace && sendable(namespace)) h.set(CONSUMER_NAMESPACE_HEADER, namespace);
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
