import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { ConfigService } from "@gov/api";

/** The config service's Connect routes for an implementation, to mount on any server (HTTP/1.1, h2c). */
export function configRoutes(impl: ServiceImpl<typeof ConfigService>) {
  return (router: ConnectRouter) => {
    router.service(ConfigService, impl);
  };
}
