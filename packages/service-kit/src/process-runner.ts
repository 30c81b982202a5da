import { setMaxListeners } from "node:events";
import { constants as h2, type Http2Server, type Http2Session, type ServerHttp2Stream } from "node:http2";
import type { ServerResponse } from "node:http";
import { Server as NetServerClass, type Server as NetServer, type Socket } from "node:net";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type Interceptor, type Transport } from "@connectrpc/connect";
import { connectRedis, createSubscriberHub, parseRedisUrl, quitQuietly, requireReplicas, type RedisClient, type SubscriberHub } from "@gov/redis";
import { issueRequestIds, monitorSettings, requestIdFromHeader, startIdgenMonitor, type AuthorizeManagement, type IdgenMonitor } from "@gov/idgen-monitor";
import { Counter, Gauge } from "prom-client";
import { loadSettings, misspelledFileKeys, parseBoolean, rawSetting, SettingsError, LONGEST_TIMER_MS, parseDurationBetween, parseInteger, readSettingsSources, type SettingDef, type SettingsSources } from "@gov/settings";
import type { FastifyInstance } from "fastify";
import { untilAborted } from "./abortable.js";
import { limitOpenStreams, openWatchesSetting } from "./open-streams.js";
import { trustedProxiesSetting } from "./client-address.js";
import { admitInTurns } from "./request-admission.js";
import { corsSettings } from "./cors.js";
import { errorInterceptor, toConnectError } from "./errors.js";
import { clientErrorStatus } from "./http-errors.js";
import { HTTP1_ANSWERED, type Http1Answered } from "./grpc/http1-on-h2c.js";
import { createLogger, urlForLog, type Logger } from "./logger.js";
import { buildManagementApp, createReadiness, type Readiness } from "./management.js";
import { createMetrics, type Metrics } from "./metrics.js";
import { settleNextTickShape } from "./next-tick-shape.js";
import { requestTimeoutSetting } from "./request-errors.js";
import { createConnectServer, createH2cServer } from "./serve-connect.js";
import { endpointSettings, type ModuleInstance, type ModuleLimits, type ProcessGuard, type ServiceModule, type SharedResource } from "./service-module.js";
import { sharedSettings } from "./shared-settings.js";
import { outageAnswersOf } from "./outage-answers.js";
import { inProcessTransport, type LocalService } from "./transport/in-process.js";
import { remoteTransport } from "./transport/remote.js";

/** Settings every process reads (contract §3, §8); each module adds its own and its endpoint settings. */
export const processSettings = {
  port: { name: "PORT", parse: parseInteger(0, 65535), default: 8080, doc: "port of the REST gateway (and, in the all-in-one process, of Connect/gRPC)" } as SettingDef<number>,
  host: { name: "HOST", parse: (s: string) => s.trim(), default: "0.0.0.0", doc: "address the gateway binds to" } as SettingDef<string>,
  grpcPort: {
    name: "gov.grpc.port",
    parse: parseInteger(0, 65535),
    default: 9090,
    doc: "h2c port for gRPC clients of the services this process runs (all-in-one); Connect and gRPC-Web use PORT",
  } as SettingDef<number>,
  managementPort: {
    name: "management.server.port",
    parse: parseInteger(0, 65535),
    default: 8081,
    doc: "management listener (`/actuator/health`, `/metrics`); a service's own process defaults to its port + 100 (config: 8191)",
  } as SettingDef<number>,
  shutdownGrace: {
    name: "gov.shutdown.grace",
    parse: parseDurationBetween(0, LONGEST_TIMER_MS),
    default: 10_000,
    doc: "on SIGTERM: how long in-flight calls may take to finish before the process exits anyway",
  } as SettingDef<number>,
  requestTimeout: requestTimeoutSetting,
  openWatches: openWatchesSetting,
  trustedProxies: trustedProxiesSetting,
  ...corsSettings,
  logAccess: { name: "gov.log.access", parse: parseBoolean, default: false, doc: "`true` logs one line per HTTP request (method, URL, status, time)" } as SettingDef<boolean>,
  ...monitorSettings,
};

/** What the runner hands a gateway builder (`@gov/gateway`'s `restGateway`): the REST app is built, not listening. */
export interface GatewayBuild {
  /**
   * Every module's services, each with the transport that reaches it (in-process or HTTP) and, when its module names
   * the setting behind its request limit, that limit: what a raw-content REST body of the service (a config's text)
   * may be, which the gateway's own JSON body limit does not decide.
   */
  services: { service: DescService; transport: Transport; rawBodyLimit?: BodyLimit }[];
  logger: Logger;
  sources: SettingsSources;
  /** The largest request and upload the modules accept; how long a request may take to arrive (gov.limits.request-timeout). */
  limits: { maxRequestBytes: number; maxUploadBytes: number; requestTimeoutMs: number };
  /** The local services' Connect routes, to serve (Connect, gRPC-Web) on the gateway's port too. */
  connect?: { routes: (router: ConnectRouter) => void; interceptors: Interceptor[]; readMaxBytes?: number };
}

/** A body limit and the setting that sets it, which an over-limit answer names (e.g. gov.limits.config-content). */
export interface BodyLimit {
  bytes: number;
  setting: string;
}

/** The module's request limit, when it names its setting: a limit without one could not be named in a 413. */
function rawBodyLimitOf(limits: ModuleLimits): BodyLimit | undefined {
  const setting = limits.settings?.maxRequestBytes;
  return limits.maxRequestBytes !== undefined && setting ? { bytes: limits.maxRequestBytes, setting } : undefined;
}

/** Builds the gateway; `settings`: the gateway's own settings, read (and a bad one refused) before anything is opened. */
export type GatewayBuilder = ((build: GatewayBuild) => Promise<FastifyInstance>) & { settings?: Record<string, SettingDef> };

export interface ProcessOptions {
  /** Logger name, e.g. "gov.gateway". */
  name: string;
  /** What the banner calls the process. Default "Governance platform" with a gateway, else "<name> service". */
  title?: string;
  /** The modules this process knows; each runs here unless its `gov.<name>-service.url` is set. */
  modules: ServiceModule[];
  /** Serve the /v1 REST API (and /openapi.json, /docs) on PORT, in front of every module, local or remote. */
  gateway?: GatewayBuilder;
  /** Default: gov.yaml / GOV_CONFIG and the environment. */
  sources?: SettingsSources;
  logger?: Logger;
  /** How often readiness re-asks the modules between probes (for gRPC health watchers). Default 5 s. */
  healthIntervalMs?: number;
  /**
   * The security module's seam for the management listener: the caller's Authorization header → "admin" | "user" |
   * undefined. Admins may call the id operations and DELETE; any known caller sees health details. `management.token`
   * is checked first and is an admin.
   */
  authorizeManagement?: AuthorizeManagement;
  /** `false` runs without the ID generator and its monitor (benchmarks measure what it costs). Default true. */
  ids?: boolean;
  /** Authorization and audit in front of every local service (`securityGuard` of @gov/security-service); none = open. */
  guard?: ProcessGuard;
}

export interface ProcessUrls {
  /** HTTP/1.1: REST (with a gateway), Connect, gRPC-Web. */
  url: string;
  /** h2c (gRPC); absent when no module runs here. */
  grpcUrl?: string;
  managementUrl: string;
}

export interface ModuleState {
  name: string;
  /** In this process, or reached over HTTP at `url`. */
  local: boolean;
  url?: string;
  /** Where its data lives, or which remote service it calls. */
  describe: string;
}

export interface BuiltProcess {
  logger: Logger;
  readiness: Readiness;
  metrics: Metrics;
  /** HTTP/1.1 app: the gateway (REST + Connect + gRPC-Web), or Connect + gRPC-Web for a service's own process. */
  http: FastifyInstance;
  /** h2c app (gRPC), when some module runs here. */
  grpc?: FastifyInstance;
  management: FastifyInstance;
  /** The ID generator and its monitor (absent with `ids: false`). */
  monitor?: IdgenMonitor;
  modules: ModuleState[];
  /** Lines the guard wants in the startup banner. */
  notices: string[];
  /** The transport the process uses for a service (in-process or remote). */
  transportFor(service: DescService): Transport;
  /** Listens on the configured ports (or the overrides; 0 = any free port). */
  listen(overrides?: { port?: number; grpcPort?: number; managementPort?: number; host?: string }): Promise<ProcessUrls>;
  /**
   * Graceful stop: readiness DOWN, no new connections, open streams end with `unavailable` (gRPC sessions get GOAWAY),
   * in-flight calls finish within `gov.shutdown.grace`, then everything closes (modules, Redis). Idempotent.
   */
  shutdown(): Promise<void>;
}

/**
 * Builds a whole process from its modules without listening (tests `inject` into `http`): one interceptor chain, one
 * Redis client and Pub/Sub hub, each module in-process or remote by its settings, the listeners and the shutdown.
 */
export async function buildProcess(options: ProcessOptions): Promise<BuiltProcess> {
  const sources = options.sources ?? readSettingsSources();
  const logger = options.logger ?? createLogger(options.name);
  const settings = loadSettings(processSettings, sources);
  const { redisUrl, minReplicas, replicaAckTimeout } = loadSettings(
    { redisUrl: sharedSettings.redisUrl, minReplicas: sharedSettings.minReplicas, replicaAckTimeout: sharedSettings.replicaAckTimeout },
    sources,
  );

  // Every setting is read (and a bad one stops startup) before anything is opened: a store, the super user (whose
  // generated password is shown once), a lease.
  if (options.gateway?.settings) loadSettings(options.gateway.settings, sources);
  const planned = options.modules.map((module) => {
    const endpoint = loadSettings(endpointSettings(module.name, module.ports), sources);
    const own = loadSettings(module.settings, sources);
    return { module, endpoint, settings: own, limits: module.limits?.(own) ?? {} };
  });
  const localPlans = planned.filter((p) => !p.endpoint.url);
  if (!options.gateway && localPlans.length === 0) {
    const names = planned.map((p) => `gov.${p.module.name}-service.url`).join(", ");
    throw new Error(`this process has nothing to run: ${names} ${planned.length === 1 ? "is" : "are"} set, so the service would run elsewhere; unset it to run the service here`);
  }

  // The interceptor chain, built once for every listener and the in-process transport. Order (outermost first):
  // metrics see the final code; drain refuses new calls and ends streams at shutdown; the open-stream limit refuses a
  // watch past gov.limits.open-watches; the guard's (audit, then authorization) go between it and errors; errors turn
  // store outages and bugs into Connect codes.
  const metrics = createMetrics();
  const drain = createDrain();
  const openStreams = limitOpenStreams(settings.openWatches);
  new Gauge({
    name: "gov_open_watches",
    help: "Watches (server streams: SSE, Connect, gRPC) open in this process; gov.limits.open-watches bounds them",
    registers: [metrics.registry],
    collect() {
      this.set(openStreams.open());
    },
  });
  const interceptors: Interceptor[] = [metrics.interceptor, drain.interceptor, openStreams.interceptor, errorInterceptor(logger)];

  const closers: (() => Promise<void>)[] = []; // in reverse order of opening
  let redis: RedisClient | undefined;
  let monitor: IdgenMonitor | undefined;
  let subscriber: SubscriberHub | undefined;
  const instances: { name: string; instance: ModuleInstance }[] = [];
  const notices: string[] = [];
  const remoteTransports = new Map<string, Transport>();
  let local: Transport | undefined;
  const ownerOf = (service: DescService) => planned.find((p) => p.module.services.some((s) => s.typeName === service.typeName));
  const transportFor = (service: DescService): Transport => {
    const plan = ownerOf(service);
    if (!plan) throw new Error(`no module of this process serves ${service.typeName}: add its module to the list`);
    if (!plan.endpoint.url) {
      if (!local) throw new Error(`${service.typeName} was called before the process finished starting`);
      return local;
    }
    let remote = remoteTransports.get(plan.module.name);
    if (!remote) remoteTransports.set(plan.module.name, (remote = remoteTransport(plan.endpoint.url, { serviceName: plan.module.name, interceptors: [metrics.remoteInterceptor, drain.clientInterceptor, openStreams.interceptor] })));
    return remote;
  };
  // Resolved at the first call, so modules may ask for each other in any order; then kept (the plan never changes once
  // the process has started), so a REST call does not search the module list every time.
  const lazyTransport = (service: DescService): Transport => {
    let resolved: Transport | undefined;
    const target = () => (resolved ??= transportFor(service)); // a throw (not started yet) leaves it unresolved
    return {
      unary: (method, signal, timeoutMs, header, input, contextValues) => target().unary(method, signal, timeoutMs, header, input, contextValues),
      stream: (method, signal, timeoutMs, header, input, contextValues) => target().stream(method, signal, timeoutMs, header, input, contextValues),
    };
  };
  // What modules call each other with: the guard's credentials for calls that carry none (a worker has no caller to
  // act for). Not the gateway's transport: a REST client without a token stays without one.
  let internalHeaders: ((header: HeadersInit | undefined) => Promise<HeadersInit | undefined>) | undefined;
  const moduleTransport = (service: DescService): Transport => ({
    unary: async (method, signal, timeoutMs, header, ...rest) =>
      transportFor(service).unary(method, signal, timeoutMs, internalHeaders ? await internalHeaders(header) : header, ...rest),
    stream: async (method, signal, timeoutMs, header, ...rest) =>
      transportFor(service).stream(method, signal, timeoutMs, internalHeaders ? await internalHeaders(header) : header, ...rest),
  });

  try {
    // The ID generator leases its machine id in Redis, so even a gateway with every module remote connects to it.
    const idsOn = options.ids !== false;
    // The management listener asks the guard (security) who a caller is; the guard is made after the modules.
    let guardAuthorizes: AuthorizeManagement | undefined;
    if ((localPlans.length || idsOn) && redisUrl) {
      const client = await connectRedis(redisUrl);
      redis = client;
      if (minReplicas > 0) {
        const underReplicated = new Counter({
          name: "gov_redis_under_replicated_writes_total",
          help: `Redis writes acknowledged by fewer than gov.redis.min-replicas replicas within gov.redis.replica-ack-timeout (applied on the master only)`,
          registers: [metrics.registry],
        });
        const closeWriter = await requireReplicas(client, { minReplicas, timeoutMs: replicaAckTimeout, logger, underReplicated });
        closers.push(closeWriter); // runs before the client's quit (closers run in reverse)
      }
      closers.push(() => quitQuietly(client));
      if (localPlans.length || options.guard) {
        const hub = createSubscriberHub(client);
        subscriber = hub;
        closers.push(() => hub.close());
      }
    }
    if (idsOn) {
      const started = await startIdgenMonitor({ sources, application: ID_APPLICATION, redis, logger, registry: metrics.registry, authorizeManagement: (header) => (options.authorizeManagement ?? guardAuthorizes)?.(header) ?? Promise.resolve(undefined) });
      monitor = started;
      closers.push(() => started.close()); // before Redis closes: the machine id is released there
    }
    const ids = { nextId: monitor ? unavailableOnStop(monitor.nextId) : () => crypto.randomUUID() };
    const redisKind = redisUrl ? (parseRedisUrl(redisUrl).kind === "cluster" ? "redis-cluster" : "redis") : undefined;
    const shared = createSharedResources(logger);
    closers.push(() => shared.close()); // after every module (closers run in reverse), before the Redis client
    // The REST API's address as listen() will have it without overrides (runProcess): modules print it before then.
    const restUrl = options.gateway && settings.port ? `http://${shownHost(settings.host)}:${settings.port}` : undefined;
    for (const plan of localPlans) {
      const instance = await plan.module.create({
        logger: logger.child({ module: plan.module.name }),
        settings: plan.settings,
        sources,
        redis,
        redisKind: redis ? redisKind : undefined,
        subscriber,
        transportFor: moduleTransport,
        ids,
        shared: shared.get,
        restUrl,
      });
      instances.push({ name: plan.module.name, instance });
      closers.push(() => instance.close());
    }
    // A process that serves no RPC of its own (a gateway whose services all run elsewhere, a stats worker) still has a
    // management port whose admins are the security service's: with the shared Redis, its guard checks their tokens
    // there, and guards nothing else (the services it calls guard and audit their own calls).
    const servesRpcs = localPlans.some((p) => p.module.services.length > 0);
    const guard = options.guard && (servesRpcs || redis) ? await options.guard({ logger, sources, redis, redisKind: redis ? redisKind : undefined, subscriber, instanceOf: (name) => instances.find((i) => i.name === name)?.instance, ids }) : undefined;
    if (guard) {
      closers.push(() => guard.close()); // before the modules: it may still write to their stores
      guardAuthorizes = guard.authorizeManagement?.bind(guard);
    }
    if (guard && servesRpcs) {
      // The guard's own failures (a user lookup during a Redis failover) are answered like a handler's — 503, not
      // Connect's bare "internal error" — without logging each outage twice (the inner interceptor logs handlers').
      const guardFailures: Interceptor = (next) => async (req) => {
        try {
          return await next(req);
        } catch (err) {
          throw err instanceof ConnectError ? err : toConnectError(err, logger);
        }
      };
      // With security off the guard has no interceptors, and nothing of its own to fail: no layer (one await per call).
      if (guard.interceptors.length > 0) interceptors.splice(interceptors.length - 1, 0, guardFailures, ...guard.interceptors);
      notices.push(...(guard.notices ?? []));
      internalHeaders = guard.internalHeaders;
    }
  } catch (err) {
    await closeAll(closers, logger);
    throw err;
  }

  const impls: LocalService[] = instances.flatMap((m) => m.instance.impls);
  local = inProcessTransport(impls, interceptors);
  const routes = (router: ConnectRouter) => {
    for (const { service, impl } of impls) router.service(service, impl);
  };
  const maxRequestBytes = Math.max(0, ...planned.map((p) => p.limits.maxRequestBytes ?? 0));
  const maxUploadBytes = Math.max(0, ...planned.map((p) => p.limits.maxUploadBytes ?? 0));
  // A Connect request message may carry an upload (a ZIP import), plus its envelope.
  const readMaxBytes = maxUploadBytes || maxRequestBytes ? Math.max(maxUploadBytes, maxRequestBytes) + 1024 : undefined;
  // The module setting behind the larger limit, for the gRPC and Connect listeners' over-limit messages (plus the envelope).
  const settingOf = (kind: "maxRequestBytes" | "maxUploadBytes", bytes: number) => planned.find((p) => p.limits[kind] === bytes)?.limits.settings?.[kind];
  const largestSetting = maxUploadBytes >= maxRequestBytes ? settingOf("maxUploadBytes", maxUploadBytes) : settingOf("maxRequestBytes", maxRequestBytes);
  const limitSetting = largestSetting ? `${largestSetting}, plus 1 KiB` : undefined;

  const readiness = createReadiness([
    ...instances.map((m) => ({ name: m.name, health: () => m.instance.health() })),
    ...(monitor ? [{ name: "idgen", health: monitor.readiness }] : []),
  ]);
  const requestTimeoutMs = settings.requestTimeout;
  // Where HTTP/1.1 requests go, for the gRPC listener to tell one that came to it: known once listen() has the address.
  let http1Listener: { url: string; serves: string } | undefined;
  const connectOptions = { routes, interceptors, logger, readMaxBytes, readMaxBytesSetting: limitSetting, requestTimeoutMs, serving: readiness, corsOrigins: settings.corsOrigins, trustedProxies: settings.trustedProxies, http1Listener: () => http1Listener };
  let http: FastifyInstance;
  let grpc: FastifyInstance | undefined;
  let management: FastifyInstance;
  try {
    http = options.gateway
      ? await options.gateway({
          services: planned.flatMap((p) => p.module.services.map((service) => ({ service, transport: lazyTransport(service), rawBodyLimit: rawBodyLimitOf(p.limits) }))),
          logger,
          sources,
          limits: { maxRequestBytes, maxUploadBytes, requestTimeoutMs },
          connect: impls.length ? { routes, interceptors, readMaxBytes } : undefined,
        })
      : await createConnectServer(connectOptions);
    grpc = impls.length ? await createH2cServer(connectOptions) : undefined;
    management = await buildManagementApp({ logger, readiness, metrics, requestTimeoutMs, healthComponents: monitor?.healthComponents, showDetails: monitor?.showsDetails, extend: monitor?.mount, unrecoverable: monitor?.stopped });
  } catch (err) {
    await closeAll(closers, logger);
    throw err;
  }
  if (monitor) {
    // Request ids from the generator: x-request-id, forwarded to the services, the reqId of the request's log lines.
    for (const app of [http, grpc]) {
      if (!app) continue;
      // refusals are answered before any route, so no other log sees them: the outage log counts them
      issueRequestIds(app.server as never, monitor.nextId, (message) => outageAnswersOf(logger).report("unavailable", { reason: "no request id" }, message));
      app.setGenReqId(requestIdFromHeader);
    }
  }
  // the outermost wrapper: a request waiting for its turn waits whole (its request id too)
  for (const app of [http, grpc]) if (app) admitInTurns(app.server as never);
  if (settings.logAccess) for (const app of [http, grpc]) if (app) logAccess(app, logger);
  const sessions = grpc ? trackOpen<Http2Session>(grpc.server as unknown as Http2Server, "session") : new Set<Http2Session>();
  // Their sockets too: what the grace's end cuts (see shutdown).
  const grpcSockets = grpc ? trackOpen<Socket>(grpc.server as unknown as NetServer, "connection") : new Set<Socket>();
  const h2Calls = grpc ? trackH2Calls(grpc.server as unknown as Http2Server, impls) : new Set<ServerHttp2Stream>();
  const connections = trackOpen<Socket>(http.server as unknown as NetServer, "connection");

  // Listening addresses: the gateway's (PORT, HOST, gov.grpc.port), or the first local module's own endpoint.
  const own = options.gateway ? undefined : localPlans[0].endpoint;
  const ownPrefix = own ? `gov.${localPlans[0].module.name}-service` : undefined;
  // The settings behind each listener, for a refusal that names the one to change (EADDRINUSE alone does not say which).
  const listenerSettings = {
    host: ownPrefix ? `${ownPrefix}.host` : "HOST",
    port: ownPrefix ? `${ownPrefix}.port` : "PORT",
    grpcPort: ownPrefix ? `${ownPrefix}.grpc-port` : "gov.grpc.port",
    managementPort: processSettings.managementPort.name,
  };
  const ports = {
    port: own ? own.port : settings.port,
    grpcPort: own ? own.grpcPort : settings.grpcPort,
    host: own ? own.host : settings.host,
    managementPort: own ? loadSettings({ p: { ...processSettings.managementPort, default: own.port ? own.port + 100 : 0 } }, sources).p : settings.managementPort,
  };

  const modules: ModuleState[] = planned.map((p) => {
    const instance = instances.find((i) => i.name === p.module.name)?.instance;
    return instance
      ? { name: p.module.name, local: true, describe: instance.describe ?? "in this process" }
      : { name: p.module.name, local: false, url: p.endpoint.url, describe: `remote ${p.module.name} service at ${p.endpoint.url}` };
  });

  let stopping: Promise<void> | undefined;
  const shutdown = async () => {
    readiness.shutDown();
    // One turn of the event loop between the two: grpc.health.v1 watchers get NOT_SERVING on their streams (a load
    // balancer's cue to stop sending) before the drain ends every stream with `unavailable`.
    await new Promise((resolve) => setImmediate(resolve));
    const deadline = Date.now() + settings.shutdownGrace;
    const servers = [http, grpc].filter((a): a is FastifyInstance => !!a && a.server.listening);
    // The gRPC listener stops accepting and its sessions get GOAWAY at once: h2 clients open no new streams or
    // connections here, finish the streams they have and reconnect elsewhere.
    grpc?.server.close(() => {});
    for (const session of sessions) session.close();
    await lingerOnOpenConnections(http, connections, deadline);
    // As on HTTP/1.1 (see lingerOnOpenConnections): a call whose request is still arriving began before the signal.
    await waitUntil(async () => !receivingH2Call(h2Calls), deadline);
    drain.begin();
    for (const app of servers) app.server.close(() => {}); // no new connections (the HTTP/1.1 listener has none since the linger)
    const drained = await waitUntil(async () => {
      for (const app of servers) (app.server as { closeIdleConnections?: () => void }).closeIdleConnections?.();
      if (drain.inflight() > 0) return false;
      const counts = await Promise.all(servers.map((app) => connectionsOf(app.server as unknown as NetServer)));
      return counts.every((n) => n === 0);
    }, deadline);
    if (!drained) {
      logger.warn({ graceMs: settings.shutdownGrace, inflight: drain.inflight() }, "shutdown grace period over: closing the remaining connections");
      // A GOAWAY'd session lives until its client closes its side of every stream; one that never does would hold
      // close() forever (Node does not end h2 sessions on server close). Past the grace, they are cut — and their
      // sockets with them: Node's destroy() of a session already closed only ends its socket and waits for the
      // client's FIN, so a client that neither reads nor closes held the process up for ever.
      for (const session of sessions) session.destroy();
      for (const socket of grpcSockets) socket.destroy();
    }
    await Promise.all([http.close(), grpc?.close()]);
    readiness.stop();
    // The modules' last writes (audit entries, the stat mutex, the machine id) wait on the store, and a store that does
    // not answer would hold each one for its command timeout in turn (13 s past a 1 s grace): they get one bound.
    const cleanup = closeAll(closers, logger).then(() => true);
    const done = await Promise.race([cleanup, new Promise<false>((resolve) => setTimeout(resolve, SHUTDOWN_CLEANUP_MS, false).unref())]);
    if (!done) {
      logger.warn({ cleanupMs: SHUTDOWN_CLEANUP_MS }, `shutdown: the modules and stores did not close within ${SHUTDOWN_CLEANUP_MS / 1000} s (a store that does not answer): going on without them; what they had not written is logged above`);
      // The machine id's release comes after the modules' last writes: those used up the bound, and the seed's line
      // that tells the operator the id was not released (it becomes free after the safe-guard duration) was missing.
      monitor?.closeAbandoned(`the shutdown gave up on the store after ${SHUTDOWN_CLEANUP_MS / 1000} s, before the machine id was released`);
    }
    await management.close();
  };

  // Every setting of this process has been read by now: a file key a letter or two from one of them is a typo that
  // would silently do nothing (keys far from all of them may be other process kinds' settings: left alone).
  for (const { key, meant } of misspelledFileKeys(sources)) {
    logger.warn({ key, meant, file: sources.filePath }, `settings file ${sources.filePath}: "${key}" is no setting (did you mean "${meant}"?): ignored`);
  }

  return {
    logger,
    readiness,
    metrics,
    http,
    grpc,
    management,
    monitor,
    modules,
    notices,
    transportFor,
    async listen(overrides = {}) {
      const host = overrides.host ?? ports.host;
      // each setting named with where its value came from, as every other refused setting is
      const named = (setting: string) => {
        const from = rawSetting(setting, sources)?.from;
        return from ? `${setting} (from ${from})` : setting;
      };
      const on = (app: FastifyInstance, override: number | undefined, port: number, portSetting: string) =>
        listenNamingSettings(app, { host, port: override ?? port }, { host: overrides.host === undefined ? named(listenerSettings.host) : listenerSettings.host, port: override === undefined ? named(portSetting) : portSetting });
      await on(http, overrides.port, ports.port, listenerSettings.port);
      if (grpc) await on(grpc, overrides.grpcPort, ports.grpcPort, listenerSettings.grpcPort);
      await on(management, overrides.managementPort, ports.managementPort, listenerSettings.managementPort);
      readiness.watch(options.healthIntervalMs ?? 5000);
      const urlOf = (app: FastifyInstance) => `http://${shownHost(host)}:${(app.server.address() as { port: number }).port}`;
      http1Listener = { url: urlOf(http), serves: options.gateway ? "REST, Connect and gRPC-Web" : "Connect and gRPC-Web" };
      return { url: urlOf(http), grpcUrl: grpc ? urlOf(grpc) : undefined, managementUrl: urlOf(management) };
    },
    shutdown: () => (stopping ??= shutdown()),
  };
}

/**
 * The application name every process of the product gives its ID generator (the default `idgen.namespace`): the
 * gateway, each service and each worker are parts of one application, which shares one audit log and one space of
 * request ids, so they lease machine ids from one pool. Named per process kind (config-service, registry-service, …),
 * the first process of each kind leased machine id 0 and issued the ids another kind issued (985 of 20,000 ids taken
 * from the config and the registry service at once were the same).
 */
export const ID_APPLICATION = "gov";

/** A listening host as a URL shows it: every interface is reachable as localhost from the machine itself. */
const shownHost = (host: string) => (host === "0.0.0.0" || host === "::" ? "localhost" : host);

/**
 * Listens, and when the address cannot be had says which setting to change: the port's (in use, or not allowed) or the
 * host's (not an address of this machine, or no such name); Node's own words (`listen EADDRINUSE: address already in
 * use 127.0.0.1:8080`) name neither, and a process has three listeners.
 */
async function listenNamingSettings(app: FastifyInstance, at: { host: string; port: number }, settings: { host: string; port: string }): Promise<void> {
  try {
    await app.listen(at);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const address = `${at.host}:${at.port}`;
    if (code === "EADDRINUSE") throw new SettingsError(`setting ${settings.port} is invalid: port ${at.port} is in use on ${at.host} (another process listens there): stop it, or choose another port`);
    if (code === "EACCES") throw new SettingsError(`setting ${settings.port} is invalid: this process may not listen on ${address} (ports below 1024 need privileges): choose a port above 1023`);
    if (code === "EADDRNOTAVAIL" || code === "ENOTFOUND" || code === "EAI_AGAIN") {
      throw new SettingsError(`setting ${settings.host} is invalid: "${at.host.slice(0, 100)}" is neither an address of this machine nor a name of one: use 0.0.0.0 (every interface), 127.0.0.1, or one of its own addresses`);
    }
    throw err;
  }
}

/**
 * `npm start` and every service's own process: builds, listens, says where (a JSON log line, and a short banner for
 * people: on stdout at a terminal, else on stderr so that stdout stays JSON lines), and stops gracefully on SIGTERM or
 * SIGINT. A bad setting or an unreachable Redis stops startup with exit code 1 and a message that names it.
 */
export async function runProcess(options: ProcessOptions): Promise<BuiltProcess> {
  await settleNextTickShape(); // first: see next-tick-shape.ts
  let logger: Logger;
  try {
    logger = options.logger ?? createLogger(options.name);
  } catch (err) {
    // a bad GOV_LOG_LEVEL: no logger to say it with
    process.stderr.write(`startup failed: ${(err as Error).message}\n`);
    process.exit(1);
  }
  handleProcessFailures(logger);
  let proc: BuiltProcess | undefined;
  let urls: ProcessUrls;
  try {
    proc = await buildProcess({ ...options, logger });
    urls = await proc.listen();
  } catch (err) {
    logger.fatal({ err }, `startup failed: ${(err as Error).message}`);
    process.stderr.write(`startup failed: ${(err as Error).message}\n`);
    // Built, it holds a machine-id lease (and store connections): given back, not left to its ttl — a process that
    // failed to listen (a port in use) and was restarted in a loop held one machine id per attempt for 5 minutes.
    if (proc) await Promise.race([proc.shutdown().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, SHUTDOWN_CLEANUP_MS).unref())]);
    process.exit(1);
  }
  const stores = Object.fromEntries(proc.modules.map((m) => [m.name, m.describe]));
  logger.info({ ...urls, modules: stores }, "listening");
  const title = options.title ?? (options.gateway ? "Governance platform" : `${options.modules.find((m) => proc.modules.some((s) => s.local && s.name === m.name))?.name ?? options.name} service`);
  // A process without local services (the stats worker) has no gRPC listener and serves no RPC on this one either.
  const rpc = options.gateway ? (urls.grpcUrl ? "REST /v1, Connect and gRPC-Web" : "REST /v1") : urls.grpcUrl ? "Connect, gRPC-Web" : "no RPCs: health and metrics are on the management port";
  const docs = options.gateway ? `; docs at ${urls.url}/docs` : "";
  const lines = [`${title[0].toUpperCase()}${title.slice(1)} listening on ${urls.url}  (${rpc}${docs})`];
  if (urls.grpcUrl) lines.push(`gRPC (h2c) on ${urls.grpcUrl}`);
  lines.push(`Management on ${urls.managementUrl}  (/actuator/health, /actuator/idgen, /metrics)`);
  for (const m of proc.modules) lines.push(proc.modules.length === 1 ? `Store: ${m.describe}` : `Store (${m.name}): ${m.describe}`);
  lines.push(...proc.notices);
  (process.stdout.isTTY ? process.stdout : process.stderr).write(`\n${lines.join("\n")}\n\n`);

  let stoppingSince: number | undefined;
  const stop = (signal: NodeJS.Signals) => {
    if (stoppingSince !== undefined) {
      // `npm start` passes on the signal its process group got too (Ctrl-C, `kill -- -pgid`): that copy is no request
      // to hurry, and a second signal within a second of the first is taken for it.
      if (Date.now() - stoppingSince < 1000) return;
      // An impatient operator (or orchestrator): go now, but say so — the default handler exited without a word.
      logger.warn({ signal }, `second signal (${signal}) while shutting down: exiting now; calls still in flight get no answer, so a write among them may or may not have been applied`);
      process.exit(128 + (signal === "SIGINT" ? 2 : 15));
    }
    stoppingSince = Date.now();
    logger.info({ signal }, "shutting down: readiness DOWN, streams ending, in-flight calls finishing");
    proc.shutdown().then(
      () => {
        logger.info("stopped");
        process.exit(0);
      },
      (err: Error) => {
        logger.fatal({ err }, `shutdown failed: ${err.message}`);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  return proc;
}

/** A module's id source: once the generator stopped, a ConnectError `unavailable` (503) that says why. */
function unavailableOnStop(nextId: () => string): () => string {
  return () => {
    try {
      return nextId();
    } catch (err) {
      throw new ConnectError((err as Error).message, Code.Unavailable, undefined, undefined, err);
    }
  };
}

let failureHandlersInstalled = false;
/** A forgotten promise must not go unnoticed (Node would print it outside the JSON log, then exit). */
function handleProcessFailures(logger: Logger): void {
  if (failureHandlersInstalled) return;
  failureHandlersInstalled = true;
  // Logged and survived: one stray rejection should not take every service of the process down.
  process.on("unhandledRejection", (reason) => logger.error({ err: reason }, "unhandled promise rejection (a bug: please report it)"));
  process.on("uncaughtException", (err) => {
    logger.fatal({ err }, `uncaught exception: ${err.message}`);
    process.exit(1);
  });
}

/**
 * Refuses new calls once shutdown begins and ends open streams with `unavailable` ("reconnect elsewhere"), as a clean
 * end-of-stream on every protocol; counts unary calls in flight, which shutdown waits for.
 */
function createDrain() {
  const stopping = new AbortController();
  // Every open stream listens on this one signal (one listener per stream, removed per message): thousands of watches
  // are expected, not a leak.
  setMaxListeners(0, stopping.signal);
  let inflight = 0;
  const shuttingDown = () => new ConnectError("the server is shutting down: retry, another instance will answer", Code.Unavailable);
  const wrap = <R extends { stream: boolean; message: unknown }>(res: R): R =>
    res.stream ? { ...res, message: untilAborted(res.message as AsyncIterable<unknown>, stopping.signal, shuttingDown) } : res;
  const interceptor: Interceptor = (next) => async (req) => {
    if (stopping.signal.aborted) throw shuttingDown();
    inflight++;
    try {
      return wrap(await next(req));
    } finally {
      inflight--;
    }
  };
  // For remote transports: a gateway's proxied streams (SSE, Connect) end at shutdown too.
  const clientInterceptor: Interceptor = (next) => async (req) => wrap(await next(req));
  return {
    interceptor,
    clientInterceptor,
    inflight: () => inflight,
    begin: () => stopping.abort(),
  };
}

/**
 * What a server has open, each until it closes: an h2 listener's sessions (`session`), an HTTP/1.1 listener's
 * connections (`connection`). Tracked per session or connection, so nothing is added to a request's path.
 */
function trackOpen<T extends { once(event: "close", listener: () => void): unknown }>(server: { on(event: string, listener: (item: T) => void): unknown }, event: "session" | "connection"): Set<T> {
  const open = new Set<T>();
  server.on(event, (item: T) => {
    open.add(item);
    item.once("close", () => open.delete(item));
  });
  return open;
}

function logAccess(app: FastifyInstance, logger: Logger): void {
  // On the raw server, so it sees every request (REST, RPC, 404s) and costs nothing when off.
  app.server.on("request", (req: { method?: string; url?: string; socket?: { remoteAddress?: string } }, res: { statusCode: number; once(e: string, f: () => void): void }) => {
    const started = performance.now();
    res.once("finish", () =>
      logger.info({ req: { method: req.method, url: urlForLog(req.url), remoteAddress: req.socket?.remoteAddress }, res: { statusCode: res.statusCode }, responseTime: Math.round(performance.now() - started) }, "request completed"),
    );
  });
  // What Node refuses before a request exists (one that did not arrive within the request timeout: 408; bytes that are
  // not HTTP: 400) is answered by clientErrorHandler, straight to the socket: logged here, with what is known of it —
  // first, while the socket still knows its peer (the handler destroys it).
  app.server.prependListener("clientError", (err: Error & { code?: string }, socket: { remoteAddress?: string; destroyed: boolean }) => {
    if (err.code === "ECONNRESET") return;
    logger.info({ req: { remoteAddress: socket.remoteAddress }, res: { statusCode: clientErrorStatus(err) }, err: { code: err.code } }, "request completed");
  });
  // Its mirror image on a gRPC port: plain HTTP/1.1 answered 412 before an HTTP/2 session exists (http1-on-h2c.ts).
  app.server.on(HTTP1_ANSWERED, ({ method, url, remoteAddress }: Http1Answered) => {
    logger.info({ req: { method, url: urlForLog(url), remoteAddress }, res: { statusCode: 412 } }, "request completed");
  });
}

const NetServerClose = NetServerClass.prototype.close;

/**
 * How long a stopping process waits for the next request on its open HTTP/1.1 connections before it closes the idle
 * ones (see lingerOnOpenConnections).
 */
const SHUTDOWN_QUIET_MS = 100;

/**
 * The first step of a shutdown on the HTTP/1.1 listener: no new connections, while the ones already open are still
 * answered, each answer closing its connection (`Connection: close`) — the answers to calls in flight too. A client
 * pools its connections and may send on one at any moment; closing them idle at once (what Node's `server.close()`
 * does) resets a request sent in that instant: unread, yet to a gateway a write that "may or may not have been
 * applied" (504). So the idle ones are closed only once no request has come for a moment (a client under load empties
 * its pool here, one answer at a time, and opens its next connections elsewhere), all connections are gone, or the
 * grace is over. Watches hold their connections open; they end with the drain after this. A request whose body is
 * still arriving (an upload on a slow link) is a call in flight too, though it has not reached any handler yet: the
 * drain that follows refuses calls that begin after it, so the linger lasts until such bodies have arrived (it answered
 * an upload sent before the signal 503 "shutting down", well within the grace).
 */
async function lingerOnOpenConnections(app: FastifyInstance, sockets: Set<Socket>, deadline: number): Promise<void> {
  const server = app.server as unknown as NetServer & { prependListener(event: "request", fn: (req: unknown, res: ServerResponse) => void): void };
  if (!server.listening) return;
  let lastRequest = Date.now();
  server.prependListener("request", (_req, res) => {
    res.shouldKeepAlive = false;
    lastRequest = Date.now();
  });
  // The calls in flight answer with `Connection: close` as well, so that their clients do not send on them again.
  for (const socket of sockets) {
    const res = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
    if (res && !res.headersSent) res.shouldKeepAlive = false;
  }
  // net.Server's close, not http.Server's: that one also closes the idle connections at once, which is the point to avoid.
  NetServerClose.call(server, () => {});
  await waitUntil(async () => sockets.size === 0 || (Date.now() - lastRequest >= SHUTDOWN_QUIET_MS && !receivingBody(sockets)), deadline);
}

/** Whether a request on one of `sockets` has its headers in and its body still arriving (see lingerOnOpenConnections). */
function receivingBody(sockets: Set<Socket>): boolean {
  for (const socket of sockets) {
    const req = (socket as Socket & { _httpMessage?: ServerResponse & { req?: { complete: boolean } } })._httpMessage?.req;
    if (req && !req.complete) return true;
  }
  return false;
}

/**
 * The h2 streams of unary and server-streaming calls (gRPC, Connect over h2), each until it closes: the ones whose
 * client has not finished sending the request are calls in flight that no handler has seen yet (an import's archive
 * still arriving). Client-streaming and bidirectional calls (a keepalive) send for as long as they live: the drain
 * ends them.
 */
function trackH2Calls(server: Http2Server, impls: LocalService[]): Set<ServerHttp2Stream> {
  const paths = new Set<string>();
  for (const { service } of impls) {
    for (const m of service.methods) if (m.methodKind === "unary" || m.methodKind === "server_streaming") paths.add(`/${service.typeName}/${m.name}`);
  }
  const open = new Set<ServerHttp2Stream>();
  server.on("stream", (stream: ServerHttp2Stream, headers: Record<string, unknown>) => {
    if (stream.endAfterHeaders || !paths.has(String(headers[":path"]))) return;
    open.add(stream);
    stream.once("close", () => open.delete(stream));
  });
  return open;
}

/** Whether a call on `streams` has its request still arriving: its client has not ended its side of the stream. */
function receivingH2Call(streams: Set<ServerHttp2Stream>): boolean {
  for (const stream of streams) {
    const state = stream.destroyed ? undefined : stream.state?.state;
    if (state === h2.NGHTTP2_STREAM_STATE_OPEN) return true;
  }
  return false;
}

const connectionsOf = (server: NetServer) => new Promise<number>((resolve) => server.getConnections((err, n) => resolve(err ? 0 : n)));

/** Polls `done` every 20 ms until it holds or `deadline` passes; true when it held. */
async function waitUntil(done: () => Promise<boolean>, deadline: number): Promise<boolean> {
  for (;;) {
    if (await done()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The process-wide memo behind `ModuleContext.shared`: one promise per key (concurrent askers wait for the same open; a
 * failed open is forgotten, so the next asker tries again); `close` closes what was opened, newest first, once.
 */
function createSharedResources(logger: Logger) {
  const opened = new Map<string, Promise<SharedResource>>();
  const closers: (() => Promise<void>)[] = [];
  let closed = false;
  return {
    get<T extends SharedResource>(key: string, open: () => Promise<T>): Promise<T> {
      if (closed) return Promise.reject(new Error(`the process is shutting down: cannot open ${key}`));
      let pending = opened.get(key);
      if (!pending) {
        pending = open().then(
          (resource) => {
            closers.push(() => resource.close());
            return resource;
          },
          (err: unknown) => {
            opened.delete(key);
            throw err;
          },
        );
        opened.set(key, pending);
      }
      return pending as Promise<T>;
    },
    async close() {
      closed = true;
      await closeAll(closers, logger);
    },
  };
}

/** How long closing the modules and stores may take at shutdown, after the drain (see shutdown). */
export const SHUTDOWN_CLEANUP_MS = 6_000;

async function closeAll(closers: (() => Promise<void>)[], logger: Logger): Promise<void> {
  for (const close of closers.splice(0).reverse()) {
    try {
      await close();
    } catch (err) {
      logger.warn({ err }, "closing failed");
    }
  }
}
