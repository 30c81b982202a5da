// `npm start` / `npm run start:gateway`: the gateway with every service it does not find a URL for (see platform.ts).
import { runProcess } from "@gov/service-kit";
import { platform } from "./platform.js";

await runProcess(platform);
