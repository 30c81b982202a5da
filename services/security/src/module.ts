import { SecurityService } from "@gov/api/gen/gov/security/v1/security_pb";
import { loadSettings, rawSetting, SettingsError, type SettingsSources } from "@gov/settings";
import { sharedRedisOf, storeBackedInstance, type Guard, type GuardContext, type ModuleInstance, type ServiceModule } from "@gov/service-kit";
import { replicaWaitMsOf } from "@gov/redis";
import { createAuditWriter, type AuditWriter } from "./audit-log.js";
import { auditInterceptor, auditOpenInterceptor, authorizationInterceptor } from "./guard.js";
import type { IdSource } from "./ids.js";
import { openSecurityStore } from "./open-store.js";
import { createSecurityCore, type SecurityCore } from "./security-core.js";
import { createSecurityService } from "./security-service.js";
import { SECURITY_PORTS, securityModuleSettings } from "./settings.js";
import type { SecurityStore } from "./store/security-store.js";

export interface SecurityModuleOptions {
  /** A store opened by the caller (tests), which the module then owns; default: from REDIS_URL, on the process's Redis. */
  store?: SecurityStore;
  now?: () => number;
  /** Where a generated super-user password is shown, once (default: stdout). */
  announce?: (text: string) => void;
  /** Audit entry ids (default: the process's ID generator, `ModuleContext.ids`). */
  ids?: IdSource;
}

type Settings = ReturnType<typeof loadSettings<typeof securityModuleSettings>>;

/** What the guard of this process reuses from a local security module. */
interface SecurityParts {
  core: SecurityCore;
  writer: AuditWriter;
  ids: IdSource;
}
const partsOf = new WeakMap<ModuleInstance, SecurityParts>();

/** A setting's value as the operator gave it, and where: `"4h" (from environment variable …)`, or `15m (the default)`. */
function asGiven(def: { name: string }, defaultText: string, sources: SettingsSources): string {
  const given = rawSetting(def.name, sources);
  return given ? `"${given.raw}" (from ${given.from})` : `${defaultText} (the default)`;
}

async function openParts(store: SecurityStore, settings: Settings, ctx: { logger: GuardContext["logger"]; ids: IdSource; redis?: GuardContext["redis"]; sources: SettingsSources }, options: SecurityModuleOptions) {
  if (settings.accessValidity > settings.refreshValidity) {
    // a refresh renews access: one that expires first is never needed, and a stolen access token outlives the session
    const { accessValidity: access, refreshValidity: refresh } = securityModuleSettings;
    throw new SettingsError(
      `setting ${access.name}, ${asGiven(access, "15m", ctx.sources)}, is longer than ${refresh.name}, ${asGiven(refresh, "3h", ctx.sources)}: an access token would outlive the refresh token that renews it; make it shorter`,
    );
  }
  const core = await createSecurityCore({
    store,
    logger: ctx.logger,
    now: options.now,
    settings: {
      superUsername: settings.superUsername,
      superPassword: settings.superPassword,
      enforceInitSuperUser: settings.enforceInitSuperUser ?? settings.superInit,
      jwtSecret: settings.jwtSecret ?? settings.securityKey,
      accessValidity: settings.accessValidity,
      refreshValidity: settings.refreshValidity,
      maxFailures: settings.maxFailures,
      lockDuration: settings.lockDuration,
    },
  });
  const writer = createAuditWriter(store, settings.auditMaxEntries, ctx.logger, { replicaWaitMs: replicaWaitMsOf(ctx.redis) });
  return { core, writer, ids: options.ids ?? ctx.ids };
}

/**
 * The security service as a module of a process: login, users, roles and the audit log, stored in the system namespace.
 * Its guard ({@link createSecurityGuard}) is what enforces them, in every process that runs a service.
 */
export function createSecurityModule(options: SecurityModuleOptions = {}): ServiceModule<typeof securityModuleSettings> {
  return {
    name: "security",
    services: [SecurityService],
    settings: securityModuleSettings,
    ports: SECURITY_PORTS,
    limits: () => ({ maxRequestBytes: 256 * 1024 }),
    async create(ctx) {
      const { settings } = ctx;
      const store = options.store ?? (await openSecurityStore(settings, sharedRedisOf(ctx)));
      let parts: SecurityParts;
      try {
        parts = await openParts(store, settings, ctx, options);
        // With security off nobody logs in: the super user is made (and its password shown) when it is turned on.
        if (settings.enabled) await parts.core.initSuperUser(options.announce ?? announceOnStdout(ctx.logger), ctx.restUrl);
      } catch (err) {
        await store.close();
        throw err;
      }
      const impl = createSecurityService({ core: parts.core, store, audit: parts.writer, namespaceRule: { requireHashTag: settings.requireHashTag }, now: options.now });
      const base = storeBackedInstance({ impls: [{ service: SecurityService, impl }], store, redis: options.store ? undefined : ctx.redis, redisUrl: settings.redisUrl });
      const instance: ModuleInstance = {
        ...base,
        async close() {
          parts.core.close();
          await parts.writer.close(); // every recorded entry reaches the store before it closes
          await base.close();
        },
      };
      partsOf.set(instance, parts);
      return instance;
    },
  };
}

/**
 * The generated super-user password, once, on stdout (contract §7): as text at a terminal, else as one JSON log line,
 * so that a log collector reading stdout still gets JSON lines (and the operator finds it in the logs).
 */
function announceOnStdout(logger: GuardContext["logger"]): (text: string) => void {
  return (text) => (process.stdout.isTTY ? process.stdout.write(`${text}\n`) : logger.warn(text.trim().replace(/\s*\n[=\s]*/g, " | ").replace(/^[=|\s]+|[=|\s]+$/g, "")));
}

/** The security module as `npm start` runs it. */
export const securityModule = createSecurityModule();

/**
 * The process guard (`ProcessOptions.guard`): the audit and authorization interceptors in front of every service of
 * the process, on every transport. It uses the local security module when there is one; a process without it (a
 * config service on its own) reads the same users and roles from the shared Redis.
 */
export function createSecurityGuard(options: SecurityModuleOptions = {}) {
  return async (ctx: GuardContext): Promise<Guard> => {
    const settings = loadSettings(securityModuleSettings, ctx.sources);
    if (!settings.enabled) {
      const line = "SECURITY IS OFF (gov.security.enabled=false): every endpoint is open to everyone and nothing is audited";
      ctx.logger.warn(line);
      return { interceptors: [], notices: [`!!! ${line}`], close: async () => {} };
    }
    const local = ctx.instanceOf("security");
    let parts = local && partsOf.get(local);
    let close = async () => {};
    if (!parts) {
      if (!ctx.redis && !options.store) {
        throw new Error("this process does not run the security service and has no REDIS_URL: it needs the shared Redis to check tokens and roles against the users of the security service (set REDIS_URL, or gov.security.enabled=false)");
      }
      const store = options.store ?? (await openSecurityStore(settings, ctx.redis && ctx.subscriber ? { client: ctx.redis, kind: ctx.redisKind ?? "redis", hub: ctx.subscriber } : undefined));
      const own = await openParts(store, settings, ctx, options);
      parts = own;
      close = async () => {
        own.core.close();
        await own.writer.close();
        await store.close();
      };
    }
    const core = parts.core;
    /** A module's own call (a worker's) acts as the super user (see SecurityCore.internalHeader). */
    const internalHeaders = async (header: HeadersInit | undefined): Promise<HeadersInit | undefined> => {
      const given = new Headers(header);
      if (given.has("authorization")) return header;
      given.set("authorization", await core.internalHeader());
      return given;
    };
    return {
      internalHeaders,
      // the management listener's admins are this service's: a token of the super user or of an `admin` role holder
      authorizeManagement: (header) => core.managementRole(header ?? null),
      interceptors: [
        auditInterceptor({ selection: settings.auditAction, writer: parts.writer, ids: parts.ids, now: options.now }),
        authorizationInterceptor(parts.core, { requireHashTag: settings.requireHashTag }),
        // no entries to open on the embedded store (see createAuditWriter): no layer for it either
        ...(parts.writer.opensEntries ? [auditOpenInterceptor(parts.writer)] : []),
      ],
      // a process without a gateway serves RPCs only: its login is the Connect/gRPC call
      notices: [`Security on: log in with POST /v1/authenticate/${settings.superUsername}/login on a gateway, or the RPC gov.security.v1.SecurityService/Login (audit: ${settings.auditAction})`],
      close,
    };
  };
}

/** The guard as `npm start` installs it. */
export const securityGuard = createSecurityGuard();
