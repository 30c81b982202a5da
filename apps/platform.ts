// The all-in-one product: every service module, and the REST gateway in front of them. Adding a service is one line
// in `modules`. Each module runs in this process unless its `gov.<name>-service.url` is set (then it is called there).
import { configModule } from "@gov/config-service";
import { restGateway } from "@gov/gateway";
import { registryModule } from "@gov/registry-service";
import { securityGuard, securityModule } from "@gov/security-service";
import type { ProcessOptions } from "@gov/service-kit";
import { statsModule } from "@gov/stats-service";

export const platform = {
  name: "gov.gateway",
  modules: [configModule, registryModule, statsModule, securityModule],
  gateway: restGateway,
  // Authorization and audit in front of every service (gov.security.enabled=false turns it off).
  guard: securityGuard,
} satisfies ProcessOptions;
