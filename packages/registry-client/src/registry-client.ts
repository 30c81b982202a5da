import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import type { RetryOptions } from "./backoff.js";
import { withAccessToken, type AccessTokenSource } from "./access-token.js";
import { withConsumerHeader } from "./consumer-header.js";
import { ServiceCache } from "./discovery.js";
import { AlreadyRegisteredError, ClientClosedError, NoInstanceError } from "./errors.js";
import { toNamespace } from "./namespace.js";
import { startKeepaliveRegistration } from "./keepalive-registration.js";
import { registerRequestOf, startRegistration, type Registration } from "./registration.js";
import type { RegisterOptions, RegistryEvent, ServiceInstance } from "./types.js";

export interface RegistryClientOptions {
  /** A Connect transport to the registry (any protocol). Give this or `baseUrl`. */
  transport?: Transport;
  /** The registry's (or the gateway's) base URL, e.g. http://localhost:8080: a Connect transport over HTTP/1.1. */
  baseUrl?: string;
  /** `{dev}`, `cosky-{dev}`, or a plain `dev`, which is sent as `{dev}`. */
  namespace: string;
  /** This service's own id: the default of `register()` and the `X-Gov-Consumer` header of discovery calls. */
  serviceId: string;
  /** TTL of registered instances, ms (default 30,000; 1 s – 24 h). */
  ttlMs?: number;
  /** How often to renew, ms (default a third of the TTL). */
  renewEveryMs?: number;
  /** Deadline of each unary call, ms (default 5,000). */
  callTimeoutMs?: number;
  /** Backoff of renewals and watch reconnects after a failure. */
  retry?: RetryOptions;
  /**
   * Keep registered instances alive through the registry's Keepalive stream instead of renewal calls: no renew timer
   * in this process, and an instance whose process dies expires one TTL later. The stream needs HTTP/2: give the
   * registry's gRPC (h2c) port as `baseUrl` (e.g. http://localhost:9090; Connect over HTTP/2 is used), or an HTTP/2
   * `transport` (createGrpcTransport, or createConnectTransport with httpVersion "2"). A broken stream is reopened
   * with backoff. Discovery and deregistration still use `transport`/`baseUrl`.
   */
  keepalive?: { baseUrl: string } | { transport: Transport };
  /**
   * The access token every call carries (`Authorization: Bearer …`), for a registry with security on: a token, or a
   * function asked before each call (give one that refreshes: an access token lives 15 minutes, and the registry ends
   * a watch or keepalive stream whose token has expired; the client then reconnects with the function's new token).
   */
  accessToken?: AccessTokenSource;
}

export interface RegistryClient {
  /** The namespace as sent (a plain name converted to `{name}`). */
  readonly namespace: string;
  /**
   * Registers an instance and keeps it alive (renewals, or the keepalive stream with the `keepalive` option) until
   * `close()` (or its own `close()`). Server refusals reject as ConnectError.
   */
  register(options: RegisterOptions): Promise<Registration>;
  /** Live instances of a service, from the cache (the first call opens its watch and waits for the first answer). */
  instances(serviceId: string): Promise<readonly ServiceInstance[]>;
  /** One live instance at random weighted by weight, from the cache; none of weight above 0 → NoInstanceError. */
  choose(serviceId: string): Promise<ServiceInstance>;
  /** Listens to registration and discovery events; returns the function that stops listening. */
  on(listener: (event: RegistryEvent) => void): () => void;
  /** Stops every watch, stops renewing and deregisters every instance registered through this client. */
  close(): Promise<void>;
}

/**
 * A keepalive stream sent to a port that does not speak HTTP/2 (the REST port, HTTP/1.1) fails with Node's bare
 * "Protocol error" (`internal`): said so, with the fix. Other errors pass as they are.
 */
function keepaliveRefusal(e: unknown, keepalive: NonNullable<RegistryClientOptions["keepalive"]>): unknown {
  if (!(e instanceof ConnectError) || e.code !== Code.Internal || !/protocol error/i.test(e.rawMessage)) return e;
  const where = "baseUrl" in keepalive ? keepalive.baseUrl : "the keepalive transport's address";
  return new ConnectError(
    `the keepalive stream needs HTTP/2, and ${where} did not answer in HTTP/2 (${e.rawMessage}): give the registry's gRPC port (h2c, e.g. http://localhost:9090) as keepalive.baseUrl, not the REST port`,
    Code.FailedPrecondition,
  );
}

export function createRegistryClient(options: RegistryClientOptions): RegistryClient {
  if (!options.transport && !options.baseUrl) throw new TypeError("createRegistryClient needs a transport or a baseUrl");
  const namespace = toNamespace(options.namespace);
  const authorized = (t: Transport) => (options.accessToken === undefined ? t : withAccessToken(t, options.accessToken));
  // Protobuf rather than JSON: cheaper on both sides, and a large service's watch and list are then encoded by the
  // server a few milliseconds at a time (Connect-ES serializes JSON streams in one piece).
  const transport = authorized(options.transport ?? createConnectTransport({ baseUrl: options.baseUrl!, httpVersion: "1.1", useBinaryFormat: true }));
  const client = createClient(RegistryService, withConsumerHeader(transport, options.serviceId, namespace));
  const listeners = new Set<(e: RegistryEvent) => void>();
  const emit = (e: RegistryEvent) => {
    for (const l of listeners) {
      try {
        l(e);
      } catch {
        // a listener's bug must not stop renewals or the watch
      }
    }
  };
  const retry = options.retry ?? {};
  const closing = new AbortController();
  let closed: Promise<void> | undefined;
  const registrations = new Set<Registration>();
  /** The instance ids of `registrations` (and of those on their way): see register(). */
  const keptIds = new Set<string>();
  const caches = new Map<string, ServiceCache>();
  const regDeps = {
    client,
    namespace,
    serviceId: options.serviceId,
    ttlMs: options.ttlMs ?? 30_000,
    renewEveryMs: options.renewEveryMs,
    callTimeoutMs: options.callTimeoutMs ?? 5_000,
    retry,
    emit,
  };

  const keepalive = options.keepalive;
  // The HTTP/2 connection this client opens for its keepalive streams closes itself once idle for a second: after
  // close() has ended the streams, and between a broken stream and its reopening. Not aborted by close():
  // connect-node's Http2SessionManager.abort() (2.1, 2.2), called while a session that has just failed still has its
  // error to emit (a keepalive sent to an HTTP/1.1 port, then close()), leaves that error with no listener — an
  // uncaught 'error' event that ended the process. An idle session does not keep the process alive.
  const sessions = keepalive && !("transport" in keepalive) ? new Http2SessionManager(keepalive.baseUrl, { idleConnectionTimeoutMs: 1000 }) : undefined;
  const keepaliveDeps = keepalive && {
    ...regDeps,
    keepaliveClient: createClient(
      RegistryService,
      authorized("transport" in keepalive ? keepalive.transport : createConnectTransport({ baseUrl: keepalive.baseUrl, httpVersion: "2", sessionManager: sessions, useBinaryFormat: true })),
    ),
  };

  const cacheOf = async (serviceId: string): Promise<ServiceCache> => {
    let cache = caches.get(serviceId);
    if (cache?.isLoaded) return cache; // the steady state: no await, no I/O
    if (closing.signal.aborted) throw new ClientClosedError();
    if (!cache) {
      const created: ServiceCache = new ServiceCache({ client, namespace, retry, emit, signal: closing.signal, firstAnswerMs: regDeps.callTimeoutMs }, serviceId, () => {
        if (caches.get(serviceId) === created) caches.delete(serviceId); // the next call tries again
      });
      caches.set(serviceId, (cache = created));
    }
    await cache.ready;
    return cache;
  };

  return {
    namespace,
    async register(opts) {
      if (closing.signal.aborted) throw new ClientClosedError();
      // The id the registry gives it (contract §5), known before sending: one Registration per instance in a client.
      // Input the request cannot carry is refused first (what to fix comes before "you have it already").
      const { serviceId, schema, host, port } = registerRequestOf(regDeps, opts).request;
      const id = `${serviceId}@${schema}#${host}#${port}`;
      if (keptIds.has(id)) throw new AlreadyRegisteredError(id);
      keptIds.add(id);
      let registration: Registration;
      try {
        registration = keepaliveDeps ? await startKeepaliveRegistration(keepaliveDeps, opts).catch((e: unknown) => {
          throw keepaliveRefusal(e, keepalive!);
        }) : await startRegistration(regDeps, opts);
      } catch (err) {
        keptIds.delete(id);
        throw err;
      }
      if (closing.signal.aborted) {
        // close() ran while the registration was on its way: undo it rather than leave it renewing.
        await registration.close();
        throw new ClientClosedError();
      }
      registrations.add(registration);
      const close = registration.close;
      return Object.assign(registration, {
        close: async () => {
          registrations.delete(registration);
          try {
            await close();
          } finally {
            keptIds.delete(id);
          }
        },
      });
    },
    async instances(serviceId) {
      return (await cacheOf(serviceId)).instances;
    },
    async choose(serviceId) {
      const chosen = (await cacheOf(serviceId)).choose();
      if (!chosen) throw new NoInstanceError(namespace, serviceId);
      return chosen;
    },
    on(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      // One closing for every caller: a second close() (SIGINT after SIGTERM) waits for the deregistrations too.
      closed ??= (async () => {
        closing.abort();
        caches.clear();
        const all = [...registrations];
        registrations.clear();
        const results = await Promise.allSettled(all.map((r) => r.close()));
        const failed = results.find((r) => r.status === "rejected");
        if (failed) throw (failed as PromiseRejectedResult).reason;
      })();
      return closed;
    },
  };
}
