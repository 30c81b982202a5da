import type { GatewayBuilder } from "@gov/service-kit";
import { loadSettings } from "@gov/settings";
import { buildGateway } from "./app.js";
import { gatewaySettings } from "./settings.js";

const { maxJsonBody, trustedProxies, sseHeartbeat, corsOrigins } = gatewaySettings;

/**
 * The REST gateway as the process runner builds it (`runProcess({ gateway: restGateway, … })`): the gateway's own
 * settings from the process's sources, body limits wide enough for every module behind it.
 */
export const restGateway: GatewayBuilder = async ({ services, logger, sources, limits, connect }) => {
  const settings = loadSettings({ maxJsonBody, trustedProxies, sseHeartbeat, corsOrigins }, sources);
  return buildGateway({
    services,
    logger,
    trustedProxies: settings.trustedProxies,
    corsOrigins: settings.corsOrigins,
    sseHeartbeatMs: settings.sseHeartbeat,
    limits: { maxJsonBody: Math.max(settings.maxJsonBody, limits.maxRequestBytes), maxZipBytes: limits.maxUploadBytes, requestTimeoutMs: limits.requestTimeoutMs },
    connect,
  });
};
