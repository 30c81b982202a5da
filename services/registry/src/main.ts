// The registry service as its own process: Connect and gRPC-Web on gov.registry-service.port (HTTP/1.1), gRPC on
// gov.registry-service.grpc-port (h2c), management on management.server.port.
import { securityGuard } from "@gov/security-service";
import { runProcess } from "@gov/service-kit";
import { registryModule } from "./module.js";

await runProcess({ name: "gov.registry-service", modules: [registryModule], guard: securityGuard });
