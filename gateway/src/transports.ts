import { createRouterTransport, type ConnectRouter, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

/** In the all-in-one process: calls go through Connect's in-process router transport (no socket). */
export function inProcessTransport(routes: (router: ConnectRouter) => void, interceptors: Interceptor[]): Transport {
  return createRouterTransport(routes, { router: { interceptors } });
}

/** A remote service over HTTP/1.1 with the binary Connect protocol. */
export function remoteTransport(baseUrl: string): Transport {
  return createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true });
}
