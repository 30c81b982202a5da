import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { redactRedisUrl, redisDownReason } from "@gov/redis";
import type { HealthReport, ServiceModule } from "@gov/service-kit";
import { openRegistryStore } from "./open-store.js";
import { createRegistryService } from "./registry-service.js";
import { REGISTRY_PORTS, registryModuleSettings } from "./settings.js";
import type { RegistryStore } from "./store/registry-store.js";

/** The largest registry request: 256 metadata entries of 4 KiB fit well below it. */
export const MAX_REGISTRY_MESSAGE_BYTES = 1024 * 1024;

export interface RegistryModuleOptions {
  /** A store opened by the caller (tests), which the module then owns; default: from REDIS_URL, on the process's Redis client. */
  store?: RegistryStore;
  /** The clock of the service (tests); Date.now by default. */
  now?: () => number;
}

/**
 * The registry service as a module of a process (see `runProcess` in `@gov/service-kit`): `gov.registry-service.*`
 * decides whether it runs in the process or is called at its URL.
 */
export function createRegistryModule(options: RegistryModuleOptions = {}): ServiceModule<typeof registryModuleSettings> {
  return {
    name: "registry",
    services: [RegistryService],
    settings: registryModuleSettings,
    ports: REGISTRY_PORTS,
    // Registry messages are small (an instance with its metadata); the listeners refuse larger ones before reading them.
    limits: () => ({ maxRequestBytes: MAX_REGISTRY_MESSAGE_BYTES }),
    async create(ctx) {
      const { settings } = ctx;
      const shared = ctx.redis && ctx.subscriber ? { client: ctx.redis, kind: ctx.redisKind ?? "redis", hub: ctx.subscriber } : undefined;
      const store = options.store ?? (await openRegistryStore(settings, shared));
      const impl = createRegistryService({
        store,
        namespaceRule: { requireHashTag: settings.requireHashTag },
        instanceTtlMs: settings.instanceTtl,
        now: options.now,
      });
      const redis = options.store ? undefined : ctx.redis;
      const describe =
        store.kind === "embedded"
          ? "embedded in-process store (data is lost at exit; set REDIS_URL for Redis)"
          : `${store.kind}${settings.redisUrl && !options.store ? ` at ${redactRedisUrl(settings.redisUrl)}` : ""}`;
      return {
        impls: [{ service: RegistryService, impl }],
        describe,
        async health(): Promise<HealthReport> {
          const down = redis ? await redisDownReason(redis) : undefined;
          return down ? { status: "DOWN", details: { store: store.kind, reason: `Redis is unreachable: ${down}` } } : { status: "UP", details: { store: store.kind } };
        },
        close: () => store.close(),
      };
    },
  };
}

/** The registry module as `npm start` runs it. */
export const registryModule = createRegistryModule();
