import { processSettings } from "@gov/service-kit";
import { parseBytes, parseDuration, type SettingDef } from "@gov/settings";

/** A heartbeat faster than 100 ms would only burn CPU and bandwidth. */
function parseHeartbeat(raw: string): number {
  const ms = parseDuration(raw);
  if (ms < 100) throw new Error(`"${raw}" is too short for a heartbeat: use at least 100ms (default 15s)`);
  return ms;
}

/**
 * Settings a gateway process reads (contract §3, §7, §8): the process runner's (ports, management, shutdown, access
 * log) and the REST gateway's own. Each service's `gov.<name>-service.*` settings come with its module.
 */
export const gatewaySettings = {
  ...processSettings,
  maxJsonBody: { name: "gov.limits.json-body", parse: parseBytes, default: 1024 * 1024, doc: "largest JSON (or raw config) request body" } as SettingDef<number>,
  sseHeartbeat: { name: "gov.sse.heartbeat", parse: parseHeartbeat, default: 15_000, doc: "how often an idle SSE watch sends a heartbeat comment" } as SettingDef<number>,
};
