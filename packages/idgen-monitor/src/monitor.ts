import { defaultInstanceId, IDGEN_LOGGER_NAME, SHARE, startIdGen, type IdGen, type IdGenLogger, type RedisClient } from "@gov/idgen";
import { loadSettings, logLevelFromEnv, rawSetting, SettingsError, type SettingValues, type SettingsSources } from "@gov/settings";
import type { FastifyInstance } from "fastify";
import type { Registry } from "prom-client";
import { managementAuthorizer, type AuthorizeManagement } from "./authorize.js";
import { mountIdgenEndpoints } from "./endpoints.js";
import { idgenReadiness, idgenStopped, machineIdHealth, type ComponentHealth } from "./health.js";
import { registerIdgenMetrics } from "./metrics.js";
import { nextIdOf } from "./request-ids.js";
import { idgenConfigFromSources, monitorSettings } from "./settings.js";

export interface IdgenMonitor {
  idgen: IdGen;
  /** `{machineId}` for `/actuator/health`, its details shown per `management.endpoint.health.show-details` for this caller. */
  healthComponents(authorizationHeader: string | undefined): Promise<Record<string, ComponentHealth>>;
  /** Whether this caller sees health details (`management.endpoint.health.show-details`), for every component. */
  showsDetails(authorizationHeader: string | undefined): Promise<boolean>;
  /** Readiness: DOWN once the generators stopped, and while the clock is too far behind for them to issue ids. */
  readiness(): ComponentHealth;
  /** DOWN once the generators stopped for good (liveness: only a restart repairs it). */
  stopped(): ComponentHealth;
  /** Adds the `/actuator/idgen*` routes to the management listener (before it listens). */
  mount(app: FastifyInstance): void;
  /** A new unique id string (composite generator `idgen`, else `__share__`); throws `IdsUnavailableError` once it stopped. */
  nextId(): string;
  /** Stops the generators and releases the machine id. */
  close(): Promise<void>;
  /**
   * The process gave up waiting for its shutdown to finish (a store that does not answer) before `close()` did: logs
   * the seed's ERROR `Revert machine id of [...] failed` with `reason`, since the id was not released (once; nothing
   * when it was, or when there is no lease).
   */
  closeAbandoned(reason: string): void;
}

export interface MonitorOptions {
  /** The process's settings sources: the `idgen.*` and `management.*` settings are read from them. */
  sources: SettingsSources;
  /** Default `idgen.namespace`: the application name. */
  application: string;
  /** The process's Redis client (REDIS_URL): `redis` distributor; none: `manual`. */
  redis?: RedisClient;
  /** The process's pino logger; the library logs to a child of it (`logger: "gov.idgen"`). */
  logger: IdGenLogger & { child(bindings: object, options?: { level: string }): IdGenLogger };
  /** Where the idgen metric families go (the process's `/metrics` registry). */
  registry: Registry;
  /** The security module's seam: resolves a bearer token to a role. `management.token` is checked first. */
  authorizeManagement?: AuthorizeManagement;
}

let startedInThisProcess = 0;

/** Reads the settings (a bad one throws, naming it), starts the generators and registers the metrics. */
export async function startIdgenMonitor(o: MonitorOptions): Promise<IdgenMonitor> {
  const settings: SettingValues<typeof monitorSettings> = loadSettings(monitorSettings, o.sources);
  const config = idgenConfigFromSources(o.sources, settings.namespace ?? o.application);
  // `host:pid` names the lease owner; a second process built in the same Node process (tests, tools) must not claim
  // the first one's machine id, so it gets a suffix.
  const nth = startedInThisProcess++;
  if (config.machine.instanceId === undefined && config.machine.port === undefined && nth > 0) config.machine.instanceId = `${defaultInstanceId()}#${nth}`;
  // The library's lines go to the process's pino log, tagged `logger: "gov.idgen"`; IDGEN_LOG_LEVEL=debug shows
  // distribution, renewal and prefetch without raising the level of everything else.
  const level = logLevelFromEnv(o.sources.env, "IDGEN_LOG_LEVEL");
  // the operator's words, not the library's: where the value came from, and what gives a process its Redis
  const needsRedis = (setting: string, otherwise: string) => {
    const given = rawSetting(setting, o.sources);
    return new SettingsError(`setting ${setting}${given ? ` (from ${given.from})` : ""} is invalid: redis needs the process's Redis: set REDIS_URL, or use ${otherwise}`);
  };
  if (config.machine.enabled && config.machine.distributorType === "redis" && !o.redis) throw needsRedis("idgen.machine.distributor.type", "manual (with idgen.machine.machine-id)");
  if (config.segment.enabled && config.segment.distributorType === "redis" && !o.redis) throw needsRedis("idgen.segment.distributor.type", "memory (ids unique within this process only)");
  const idgen = await startIdGen(config, { redis: o.redis, logger: o.logger.child({ logger: IDGEN_LOGGER_NAME }, level ? { level } : undefined) });
  registerIdgenMetrics(o.registry, idgen);
  const authorize = managementAuthorizer(settings.token, o.authorizeManagement);
  const showsDetails = async (header: string | undefined) =>
    settings.showDetails === "always" || (settings.showDetails === "when-authorized" && (await authorize(header)) !== undefined);
  // The composite generator makes string ids fastest (15 characters that sort by time, ~0.3 µs): request ids are
  // on every request's path. Held, not looked up per id: removing a generator through the actuator must not take
  // request ids down with it.
  const source = idgen.registry.find("idgen") ?? idgen.registry.find(SHARE) ?? idgen.registry.find(idgen.registry.names()[0] ?? "");
  const nextId = source ? nextIdOf(source) : () => crypto.randomUUID();

  return {
    idgen,
    async healthComponents(header) {
      const health = machineIdHealth(idgen);
      return { machineId: (await showsDetails(header)) ? health : { status: health.status } };
    },
    showsDetails,
    readiness: () => idgenReadiness(idgen),
    stopped: () => idgenStopped(idgen),
    mount(app) {
      mountIdgenEndpoints(app, { idgen, exposure: settings.exposure, deleteEnabled: settings.deleteEnabled, authorize });
    },
    nextId,
    close: () => idgen.close(),
    closeAbandoned: (reason) => idgen.lease?.abandonRelease(reason),
  };
}
