import { parseDurationBetween, type SettingDef } from "@gov/settings";
import { namespaceSettings } from "@gov/namespaces";
import { endpointSettings, sharedSettings } from "@gov/service-kit";

/** Ports of the registry service's own process. */
export const REGISTRY_PORTS = { port: 8092, grpcPort: 9092 };

/** The longest per-request ttl a register may ask for (and the longest instance-ttl setting). */
export const MAX_TTL_MS = 24 * 60 * 60 * 1000;
export const MIN_TTL_MS = 1000;


/** What the registry module reads (contract §5, §8). Each is documented in the root README's settings table. */
export const registryModuleSettings = {
  ...sharedSettings,
  ...namespaceSettings,
  instanceTtl: {
    name: "gov.registry.instance-ttl",
    parse: parseDurationBetween(MIN_TTL_MS, MAX_TTL_MS),
    default: 60_000,
    doc: "how long an ephemeral instance lives without renewal, unless its registration gives a `ttl` (1 s to 24 h)",
  } as SettingDef<number>,
};

/** Every setting of the registry service, with the endpoint settings the process runner derives from its name. */
export const registrySettings = { ...registryModuleSettings, ...endpointSettings("registry", REGISTRY_PORTS) };
