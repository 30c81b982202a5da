// The stats service as its own process: Connect and gRPC-Web on gov.stats-service.port (HTTP/1.1), gRPC on
// gov.stats-service.grpc-port (h2c), management on management.server.port. It runs the stats worker too.
import { securityGuard } from "@gov/security-service";
import { runProcess } from "@gov/service-kit";
import { statsModule } from "./module.js";

await runProcess({ name: "gov.stats-service", modules: [statsModule], guard: securityGuard });
