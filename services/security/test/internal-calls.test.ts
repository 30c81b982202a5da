import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { ConfigService } from "@gov/api";
import { createConfigModule } from "@gov/config-service";
import { restGateway } from "@gov/gateway";
import { buildProcess, createLogger, type ServiceModule } from "@gov/service-kit";
import { describe, expect, it } from "vitest";
import { createSecurityGuard, createSecurityModule } from "../src/module.js";

describe("a module's own calls to other services (a worker's), with security on", () => {
  it("act as the super user, while a REST client without a token stays refused", async () => {
    let transportFor: ((s: DescService) => Transport) | undefined;
    // A module with no service of its own, like a background worker: it only calls others.
    const worker: ServiceModule = {
      name: "worker",
      services: [],
      settings: {},
      ports: { port: 0, grpcPort: 0 },
      async create(ctx) {
        transportFor = ctx.transportFor;
        return { impls: [], health: () => ({ status: "UP" }), close: async () => {} };
      },
    };
    const proc = await buildProcess({
      name: "test-internal",
      modules: [createConfigModule(), createSecurityModule({ announce: () => {} }), worker],
      gateway: restGateway,
      guard: createSecurityGuard(),
      sources: { file: {}, env: { GOV_SUPER_PASSWORD: "internal-test-pw", GOV_SECURITY_AUDIT_LOG_ACTION: "rw" } },
      logger: createLogger("test", "silent"),
    });
    try {
      const config = createClient(ConfigService, transportFor!(ConfigService));
      expect((await config.setConfig({ namespace: "{work}", configId: "a", data: "x" })).changed).toBe(true);
      expect((await config.getConfig({ namespace: "{work}", configId: "a" })).config?.data).toBe("x");
      const rest = await proc.http.inject({ method: "GET", url: "/v1/namespaces/%7Bwork%7D/configs/a" });
      expect(rest.statusCode).toBe(401);
    } finally {
      await proc.shutdown();
    }
  });
});
