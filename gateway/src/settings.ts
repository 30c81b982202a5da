import { processSettings } from "@gov/service-kit";
import { LONGEST_TIMER_MS, parseBytesBetween, parseDurationBetween, type SettingDef } from "@gov/settings";


/**
 * Settings a gateway process reads (contract §3, §7, §8): the process runner's (ports, management, shutdown, access
 * log) and the REST gateway's own. Each service's `gov.<name>-service.*` settings come with its module.
 */
export const gatewaySettings = {
  ...processSettings,
  maxJsonBody: { name: "gov.limits.json-body", parse: parseBytesBetween(1), default: 1024 * 1024, doc: "largest JSON request body (a raw config body has gov.limits.config-content)" } as SettingDef<number>,
  sseHeartbeat: { name: "gov.sse.heartbeat", parse: parseDurationBetween(100, LONGEST_TIMER_MS) /* faster would only burn CPU and bandwidth */, default: 15_000, doc: "how often an idle SSE watch sends a heartbeat comment" } as SettingDef<number>,
};
