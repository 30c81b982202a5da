import type { GatewayBuilder } from "@gov/service-kit";
import { loadSettings } from "@gov/settings";
import { buildGateway } from "./app.js";
import { gatewaySettings } from "./settings.js";

const { maxJsonBody, trustedProxies, sseHeartbeat, corsOrigins } = gatewaySettings;
const restGatewaySettings = { maxJsonBody, trustedProxies, sseHeartbeat, corsOrigins };

/**
 * The setting(s) that decide the body limit, as an over-limit answer names them: the larger of the gateway's own and
 * the modules' request limit wins (a config's content, gov.limits.config-content, may be larger than any JSON body),
 * so raising the one that is named is what lets a larger body in; at a tie both are named.
 */
function bodyLimitSetting(jsonBody: number, modules: { maxRequestBytes: number; maxRequestSetting?: string }): string {
  const own = gatewaySettings.maxJsonBody.name;
  if (!modules.maxRequestSetting || jsonBody > modules.maxRequestBytes) return own;
  return jsonBody < modules.maxRequestBytes ? modules.maxRequestSetting : `${own} / ${modules.maxRequestSetting}`;
}

/**
 * The REST gateway as the process runner builds it (`runProcess({ gateway: restGateway, … })`): the gateway's own
 * settings from the process's sources, body limits wide enough for every module behind it.
 */
export const restGateway: GatewayBuilder = async ({ services, logger, sources, limits, connect }) => {
  const settings = loadSettings(restGatewaySettings, sources);
  return buildGateway({
    services,
    logger,
    trustedProxies: settings.trustedProxies,
    corsOrigins: settings.corsOrigins,
    sseHeartbeatMs: settings.sseHeartbeat,
    limits: {
      maxJsonBody: Math.max(settings.maxJsonBody, limits.maxRequestBytes),
      maxJsonBodySetting: bodyLimitSetting(settings.maxJsonBody, limits),
      maxZipBytes: limits.maxUploadBytes,
      requestTimeoutMs: limits.requestTimeoutMs,
    },
    connect,
  });
};
// read by the process runner before it opens anything, so that a bad one stops startup first
restGateway.settings = restGatewaySettings;
