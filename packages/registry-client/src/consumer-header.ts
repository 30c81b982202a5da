import type { Transport } from "@connectrpc/connect";

/** The header that tells the registry which service is asking (the topology is built from it). */
export const CONSUMER_HEADER = "X-Gov-Consumer";
/** Its namespace: the registry records the edge there, whichever namespace the discovered service is in. */
export const CONSUMER_NAMESPACE_HEADER = "X-Gov-Consumer-Namespace";

/** Discovery methods: the calls through which a service finds the services it consumes. */
const DISCOVERY_METHODS = new Set(["WatchInstances", "ListInstances", "ChooseInstance"]);

/**
 * A header value that any HTTP stack sends as written: an ASCII one as it is, any other in RFC 8187's form
 * (`UTF-8''` and its UTF-8 bytes percent-encoded), which the registry decodes. A service id such as "支付" or "café"
 * is valid on the registry, but fetch's Headers refuses a character beyond U+00FF (a TypeError, which failed every
 * discovery call of the client), and stacks disagree on the bytes of one up to U+00FF (fetch sends "é" as one byte,
 * Node's HTTP/1.1 client as two).
 */
function headerValue(value: string): string {
  if (!/[^\u0020-\u007e]/.test(value)) return value;
  // encodeURIComponent leaves ' ( ) * as they are, which RFC 8187's attr-char does not allow
  return `UTF-8''${encodeURIComponent(value).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`;
}

function withHeader(header: HeadersInit | undefined, consumer: string, namespace: string | undefined): Headers {
  const h = new Headers(header);
  h.set(CONSUMER_HEADER, headerValue(consumer));
  // (the client discovers in its own namespace, which the registry takes for the consumer's without the header)
  if (namespace) h.set(CONSUMER_NAMESPACE_HEADER, headerValue(namespace));
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
