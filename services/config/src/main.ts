// `npm run start:config`: the config service as its own process: Connect and gRPC-Web on gov.config-service.port
// (HTTP/1.1), gRPC on gov.config-service.grpc-port (h2c), management on management.server.port (default 8191).
import { securityGuard } from "@gov/security-service";
import { runProcess } from "@gov/service-kit";
import { configModule } from "./module.js";

await runProcess({ name: "gov.config-service", modules: [configModule], guard: securityGuard });
