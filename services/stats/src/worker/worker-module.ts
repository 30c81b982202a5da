import type { ServiceModule } from "@gov/service-kit";
import { WORKER_PORTS, workerModuleSettings } from "../settings.js";

/**
 * The stats worker alone (no RPCs): what `npm run start:worker` runs. Its endpoint settings are
 * `gov.worker-service.port|host` (0 = any free port, for several workers on one host).
 */
export const workerModule: ServiceModule<typeof workerModuleSettings> = {
  name: "worker",
  services: [],
  settings: workerModuleSettings,
  ports: WORKER_PORTS,
  async create() {
    // skeleton: the job lands in the next commits
    return { impls: [], health: () => ({ status: "UP" }), close: async () => {}, describe: "stats worker" };
  },
};
