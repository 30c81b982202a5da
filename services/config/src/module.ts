import { ConfigService } from "@gov/api";
import { redactRedisUrl, redisDownReason } from "@gov/redis";
import type { HealthReport, ServiceModule } from "@gov/service-kit";
import { createConfigService } from "./config-service.js";
import { openConfigStore } from "./open-store.js";
import { CONFIG_PORTS, configModuleSettings } from "./settings.js";
import type { ConfigStore } from "./store/config-store.js";

export interface ConfigModuleOptions {
  /** A store opened by the caller (tests), which the module then owns; default: from REDIS_URL, on the process's Redis client. */
  store?: ConfigStore;
}

/**
 * The config service as a module of a process (see `runProcess` in `@gov/service-kit`): `gov.config-service.*`
 * decides whether it runs in the process or is called at its URL.
 */
export function createConfigModule(options: ConfigModuleOptions = {}): ServiceModule<typeof configModuleSettings> {
  return {
    name: "config",
    services: [ConfigService],
    settings: configModuleSettings,
    ports: CONFIG_PORTS,
    // A raw config PUT carries its content as the body; an import carries a ZIP.
    limits: (s) => ({ maxRequestBytes: s.maxContentBytes, maxUploadBytes: s.maxZipBytes }),
    async create(ctx) {
      const { settings } = ctx;
      const shared = ctx.redis && ctx.subscriber ? { client: ctx.redis, kind: ctx.redisKind ?? "redis", hub: ctx.subscriber } : undefined;
      const store = options.store ?? (await openConfigStore(settings, shared));
      const impl = createConfigService({ store, namespaceRule: { requireHashTag: settings.requireHashTag }, limits: settings });
      const redis = options.store ? undefined : ctx.redis;
      const describe =
        store.kind === "embedded"
          ? "embedded in-process store (data is lost at exit; set REDIS_URL for Redis)"
          : `${store.kind}${settings.redisUrl && !options.store ? ` at ${redactRedisUrl(settings.redisUrl)}` : ""}`;
      return {
        impls: [{ service: ConfigService, impl }],
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

/** The config module as `npm start` and `npm run start:config` run it. */
export const configModule = createConfigModule();
