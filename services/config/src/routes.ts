import type { ConnectRouter } from "@connectrpc/connect";
import { ConfigService } from "@gov/api";
import { createConfigService, type ConfigServiceDeps } from "./config-service.js";

/** The config service's Connect routes, for any transport (HTTP server or in-process). */
export function configRoutes(deps: ConfigServiceDeps) {
  return (router: ConnectRouter) => {
    router.service(ConfigService, createConfigService(deps));
  };
}
