// A stats worker as its own process (`npm run start:worker`): runs the statistics job while it holds the `stat`
// mutex. Start any number of them on one Redis; exactly one works per period. Management on management.server.port.
import { securityGuard } from "@gov/security-service";
import { runProcess } from "@gov/service-kit";
import { workerModule } from "./worker-module.js";

// The guard only checks the management port's admin tokens here (against the shared Redis): a worker serves no RPC.
await runProcess({ name: "gov.stats-worker", title: "stats worker", modules: [workerModule], guard: securityGuard });
