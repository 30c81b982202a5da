import { ConfigService } from "@gov/api";
import { sharedNamespaceIndex } from "@gov/namespaces";
import { storeBackedInstance, type ServiceModule } from "@gov/service-kit";
import { createConfigService } from "./config-service.js";
import { sharedConfigStore } from "./open-store.js";
import { CONFIG_PORTS, configModuleSettings } from "./settings.js";
import type { ConfigStore } from "./store/config-store.js";

export interface ConfigModuleOptions {
  /** A store opened by the caller (tests), which the process then owns; default: from REDIS_URL, on the process's Redis client. */
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
    limits: (s) => ({ maxRequestBytes: s.maxContentBytes, maxUploadBytes: s.maxZipBytes, settings: { maxRequestBytes: "gov.limits.config-content", maxUploadBytes: "gov.limits.zip-upload" } }),
    async create(ctx) {
      const { settings } = ctx;
      // The process's store and namespace index, shared with the other modules of the process (which close them).
      const store = await sharedConfigStore(ctx, options.store);
      const namespaces = await sharedNamespaceIndex(ctx);
      const impl = createConfigService({ store, namespaces, namespaceRule: { requireHashTag: settings.requireHashTag }, limits: settings });
      // an injected store (tests) is not the process's Redis: its health is not ours to report
      return storeBackedInstance({
        impls: [{ service: ConfigService, impl }],
        store: { kind: store.kind, close: async () => {} },
        redis: options.store ? undefined : ctx.redis,
        redisUrl: settings.redisUrl,
      });
    },
  };
}

/** The config module as `npm start` and `npm run start:config` run it. */
export const configModule = createConfigModule();
