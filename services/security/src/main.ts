// The security service as its own process: Connect and gRPC-Web on gov.security-service.port (HTTP/1.1), gRPC on
// gov.security-service.grpc-port (h2c), management on management.server.port.
import { runProcess } from "@gov/service-kit";
import { securityGuard, securityModule } from "./index.js";

await runProcess({ name: "gov.security-service", modules: [securityModule], guard: securityGuard });
