import type { ServiceModule } from "@gov/service-kit";
import { workerInstance, type StatsModuleOptions } from "../module.js";
import { WORKER_PORTS, workerModuleSettings } from "../settings.js";
import { sharedStatsStores } from "./stores.js";

/**
 * The statistics job alone (no RPCs): what `npm run start:worker` runs. Its endpoint settings are
 * `gov.worker-service.port|host` (its management port defaults to port + 100; set both to 0 for several workers on
 * one host).
 */
export function createWorkerModule(options: Pick<StatsModuleOptions, "stores" | "worker"> = {}): ServiceModule<typeof workerModuleSettings> {
  return {
    name: "worker",
    services: [],
    settings: workerModuleSettings,
    ports: WORKER_PORTS,
    async create(ctx) {
      const stores = options.stores ?? (await sharedStatsStores(ctx));
      return workerInstance(ctx, ctx.settings, stores, options, []);
    },
  };
}

export const workerModule = createWorkerModule();
