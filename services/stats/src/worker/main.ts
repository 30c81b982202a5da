// A stats worker as its own process (`npm run start:worker`): runs the statistics job while it holds the `stat`
// mutex. Start any number of them on one Redis; exactly one works per period. Management on management.server.port.
import { runProcess } from "@gov/service-kit";
import { workerModule } from "./worker-module.js";

await runProcess({ name: "gov.stats-worker", title: "stats worker", modules: [workerModule] });
