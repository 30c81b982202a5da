import type { GatewayBuilder } from "@gov/service-kit";
import { loadSettings } from "@gov/settings";
import { buildGateway } from "./app.js";
import { gatewaySettings } from "./settings.js";

const { maxJsonBody, trustedProxies, sseHeartbeat, corsOrigins } = gatewaySettings;
const restGatewaySettings = { maxJsonBody, trustedProxies, sseHeartbeat, corsOrigins };

/**
 * The REST gateway as the process runner builds it (`runProcess({ gateway: restGateway, … })`): the gateway's own
 * settings from the process's sources. JSON bodies are held to gov.limits.json-body; a service whose module names its
 * request limit (the config service: gov.limits.config-content) brings it along for its raw-content bodies.
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
      maxJsonBody: settings.maxJsonBody,
      maxZipBytes: limits.maxUploadBytes,
      requestTimeoutMs: limits.requestTimeoutMs,
    },
    connect,
  });
};
// read by the process runner before it opens anything, so that a bad one stops startup first
restGateway.settings = restGatewaySettings;
