import type { DescService } from "@bufbuild/protobuf";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { redactRedisUrl, redisDownReason, type RedisClient, type SubscriberHub } from "@gov/redis";
import { parseInteger, type SettingDef, type SettingValues, type SettingsSources } from "@gov/settings";
import type { Logger } from "./logger.js";
import type { LocalService } from "./transport/in-process.js";

/** What a module says about its own health; readiness is DOWN while any local module is DOWN. */
export interface HealthReport {
  status: "UP" | "DOWN";
  /** Shown under the module's name in `/actuator/health` (e.g. the store and why it is down). Never secrets. */
  details?: Record<string, unknown>;
}

/** What the process gives a module when it runs it in-process. */
export interface ModuleContext<S extends Record<string, SettingDef> = Record<string, SettingDef>> {
  logger: Logger;
  /** The module's own settings, loaded from the process's sources. */
  settings: SettingValues<S>;
  /** The raw sources (file + environment), for settings the module reads from elsewhere. */
  sources: SettingsSources;
  /** The process's one Redis client when REDIS_URL is set (undefined = embedded stores). The process owns it: do not quit it. */
  redis?: RedisClient;
  /** "redis" or "redis-cluster" when `redis` is set. */
  redisKind?: "redis" | "redis-cluster";
  /** The process's one Pub/Sub connection, shared by every store (set with `redis`). The process closes it. */
  subscriber?: SubscriberHub;
  /**
   * A transport to another service: in-process when this process runs it, else over HTTP to its
   * `gov.<name>-service.url`. Resolved per call, so it may be asked for before the other module is created. A call
   * without an `authorization` header gets the process guard's own credentials (security on: the super user's).
   */
  transportFor(service: DescService): Transport;
  /**
   * The process's ID generator (`idgen.namespace` = the application name, `gov` for every process of the product, so
   * that ids are unique across all of them): `nextId()` returns a new unique id string
   * (e.g. for audit entries). Once the generator has stopped (machine-id lease lost) it throws a ConnectError
   * `unavailable` that says why, which reaches the client as 503.
   */
  ids: { nextId(): string };
  /**
   * A process-wide resource (a store, an index): opened by whichever module asks for `key` first, the same instance
   * for every later caller, so the modules of one process see the same data also on the embedded store. The process
   * closes it, once, after every module has closed: a module must not close what it got here.
   */
  shared<T extends SharedResource>(key: string, open: () => Promise<T>): Promise<T>;
  /**
   * Where this process will serve the REST API (`http://localhost:8080`, from PORT and HOST), for what a module prints
   * at startup (the super user's login hint); undefined when the process has no gateway or PORT=0 (a port chosen at
   * listen time). Known before listening, so it is the configured address: `listen` overrides do not change it.
   */
  restUrl?: string;
}

/** What `ModuleContext.shared` holds: anything the process can close at the end. */
export interface SharedResource {
  close(): Promise<void>;
}

/** What a process guard (authorization and audit, contract §7) gets: the process's Redis and its local modules. */
export interface GuardContext {
  logger: Logger;
  sources: SettingsSources;
  redis?: RedisClient;
  redisKind?: "redis" | "redis-cluster";
  subscriber?: SubscriberHub;
  /** A module instance running in this process, by module name. */
  instanceOf(name: string): ModuleInstance | undefined;
  /** The process's ID generator, as modules get it (`ModuleContext.ids`). */
  ids: ModuleContext["ids"];
}

/** Interceptors a guard puts in front of every local service, on every transport (between drain and errors). */
export interface Guard {
  interceptors: Interceptor[];
  /** Lines for the startup banner (e.g. "security is OFF"). */
  notices?: string[];
  /** Who a management caller is (its Authorization header): an admin, a known user, or nobody (`undefined`). */
  authorizeManagement?(authorizationHeader: string | undefined): Promise<"admin" | "user" | undefined>;
  /** The headers of a module's own call to another service (its credentials), given the call's headers. */
  internalHeaders?(header: HeadersInit | undefined): Promise<HeadersInit | undefined>;
  close(): Promise<void>;
}

export type ProcessGuard = (ctx: GuardContext) => Promise<Guard>;

/** A module running in this process. */
export interface ModuleInstance {
  /** The implementations of `ServiceModule.services`. */
  impls: LocalService[];
  /** Readiness: DOWN while the module cannot serve (its store is unreachable). Called by probes: keep it cheap. */
  health(): HealthReport | Promise<HealthReport>;
  /** Releases what the module opened itself (not the shared Redis client). */
  close(): Promise<void>;
  /** One line for the startup log: where its data lives (e.g. "embedded in-process store"). */
  describe?: string;
}

/** Request sizes a module needs the listeners in front of it to accept (they are refused before any work). */
export interface ModuleLimits {
  /**
   * Largest request message of its RPCs. With its setting named (`settings.maxRequestBytes`) it is also the REST
   * gateway's limit for the module's raw-content bodies (a rule whose body is a string or bytes field: a config's
   * text); JSON bodies keep the gateway's gov.limits.json-body.
   */
  maxRequestBytes?: number;
  /** Largest upload (e.g. a ZIP import), which also bounds a Connect request message. */
  maxUploadBytes?: number;
  /** The settings that set the two limits above, for the over-limit messages of every listener ("… (gov.limits.zip-upload)"). */
  settings?: { maxRequestBytes?: string; maxUploadBytes?: string };
}

/**
 * One service package's contribution to a process: its Connect services, settings and how to create it.
 * `name` gives the endpoint settings `gov.<name>-service.url|port|grpc-port|host` (contract §8).
 */
export interface ServiceModule<S extends Record<string, SettingDef> = any> {
  name: string;
  services: DescService[];
  settings: S;
  /** Default ports of its own process (`npm run start:<name>`): HTTP/1.1 and h2c. */
  ports: { port: number; grpcPort: number };
  /** Read even when the module runs remotely: the gateway in front of it enforces them. */
  limits?(settings: SettingValues<S>): ModuleLimits;
  create(ctx: ModuleContext<S>): Promise<ModuleInstance>;
}

/** `"http://host:8091/"` → `"http://host:8091"`; anything but an http(s) URL is refused at startup. */
function parseServiceUrl(raw: string): string {
  if (!/^https?:\/\/[^/]+/.test(raw.trim())) throw new Error(`"${raw}" is not an http(s) URL`);
  return raw.trim().replace(/\/$/, "");
}

/** The endpoint settings of module `name` (contract §8), derived from its name alone. */
export function endpointSettings(name: string, ports: { port: number; grpcPort: number }) {
  const prefix = `gov.${name}-service`;
  return {
    url: {
      name: `${prefix}.url`,
      parse: parseServiceUrl,
      doc: `URL of a remote ${name} service (\`http://host:${ports.port}\`); unset = run it inside this process`,
    } as SettingDef<string>,
    port: {
      name: `${prefix}.port`,
      parse: parseInteger(0, 65535),
      default: ports.port,
      doc: `HTTP/1.1 port (Connect, gRPC-Web) of the ${name} service when it runs as its own process`,
    } as SettingDef<number>,
    host: {
      name: `${prefix}.host`,
      parse: (raw: string) => raw.trim(),
      default: "127.0.0.1",
      doc: `address the ${name} service binds to when it runs as its own process (\`0.0.0.0\` to serve other hosts)`,
    } as SettingDef<string>,
    grpcPort: {
      name: `${prefix}.grpc-port`,
      parse: parseInteger(0, 65535),
      default: ports.grpcPort,
      doc: `h2c port (gRPC) of the ${name} service when it runs as its own process`,
    } as SettingDef<number>,
  };
}

export type EndpointSettings = SettingValues<ReturnType<typeof endpointSettings>>;

/** The process's Redis client and Pub/Sub hub, as a store takes them (the store then owns neither). */
export interface SharedRedis {
  client: RedisClient;
  kind: "redis" | "redis-cluster";
  hub: SubscriberHub;
}

/** What a module's store gets of the process's Redis: the shared client and hub, or nothing (embedded stores). */
export function sharedRedisOf(ctx: ModuleContext): SharedRedis | undefined {
  return ctx.redis && ctx.subscriber ? { client: ctx.redis, kind: ctx.redisKind ?? "redis", hub: ctx.subscriber } : undefined;
}

/**
 * A module instance whose data lives in one store: its startup line says where, and readiness is DOWN while the
 * process's Redis does not answer. `redis` is the client the store uses (unset for an embedded or injected store).
 */
export function storeBackedInstance(opts: {
  impls: LocalService[];
  store: { kind: string; close(): Promise<void> };
  redis?: RedisClient;
  redisUrl?: string;
}): ModuleInstance {
  const { impls, store, redis, redisUrl } = opts;
  return {
    impls,
    describe:
      store.kind === "embedded"
        ? "embedded in-process store (data is lost at exit; set REDIS_URL for Redis)"
        : `${store.kind}${redis && redisUrl ? ` at ${redactRedisUrl(redisUrl)}` : ""}`,
    async health(): Promise<HealthReport> {
      const down = redis ? await redisDownReason(redis) : undefined;
      return down ? { status: "DOWN", details: { store: store.kind, reason: `Redis is unreachable: ${down}` } } : { status: "UP", details: { store: store.kind } };
    },
    close: () => store.close(),
  };
}
