import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import type { ServiceModule } from "@gov/service-kit";
import { STATS_PORTS, statsModuleSettings } from "./settings.js";

/** Stats requests are a namespace in a path: small. */
export const MAX_STATS_MESSAGE_BYTES = 64 * 1024;

export interface StatsModuleOptions {
  /** The clock of the service and the worker (tests); Date.now by default. */
  now?: () => number;
}

/**
 * The stats service as a module of a process: namespace stat and topology reads, and the stats worker (which only
 * works while this process holds the `stat` mutex). `gov.stats-service.*` decides whether it runs here.
 */
export function createStatsModule(_options: StatsModuleOptions = {}): ServiceModule<typeof statsModuleSettings> {
  return {
    name: "stats",
    services: [StatsService],
    settings: statsModuleSettings,
    ports: STATS_PORTS,
    limits: () => ({ maxRequestBytes: MAX_STATS_MESSAGE_BYTES }),
    async create() {
      // skeleton: the stat reads and the worker land in the next commits
      const impl: ServiceImpl<typeof StatsService> = {
        getStat: () => {
          throw new ConnectError("not implemented yet", Code.Unimplemented);
        },
        getTopology: () => {
          throw new ConnectError("not implemented yet", Code.Unimplemented);
        },
      };
      return { impls: [{ service: StatsService, impl }], health: () => ({ status: "UP" }), close: async () => {} };
    },
  };
}

/** The stats module as `npm start` runs it. */
export const statsModule = createStatsModule();
