import { parseBytesBetween, parseInteger, type SettingDef } from "@gov/settings";
import { namespaceSettings } from "@gov/namespaces";
import { endpointSettings, sharedSettings } from "@gov/service-kit";

/** Ports of the config service's own process (`npm run start:config`). */
export const CONFIG_PORTS = { port: 8091, grpcPort: 9091 };

/** What the config module reads (contract §3, §4, §8). Each is documented in the root README. */
export const configModuleSettings = {
  ...sharedSettings,
  ...namespaceSettings,
  maxVersions: {
    name: "gov.config.history.max-versions",
    parse: parseInteger(1, 100_000),
    default: 100,
    doc: "superseded versions kept per config; the oldest are dropped first",
  } as SettingDef<number>,
  maxContentBytes: {
    name: "gov.limits.config-content",
    parse: parseBytesBetween(1),
    default: 1024 * 1024,
    doc: "largest config content (UTF-8 bytes)",
  } as SettingDef<number>,
  maxZipBytes: {
    name: "gov.limits.zip-upload",
    parse: parseBytesBetween(1),
    default: 16 * 1024 * 1024,
    doc: "largest ZIP upload accepted by the import",
  } as SettingDef<number>,
  maxZipEntries: {
    name: "gov.limits.zip-entries",
    parse: parseInteger(1, 1_000_000),
    default: 1000,
    doc: "most entries in an imported ZIP",
  } as SettingDef<number>,
  maxZipUncompressedBytes: {
    name: "gov.limits.zip-uncompressed",
    parse: parseBytesBetween(1),
    default: 64 * 1024 * 1024,
    doc: "largest total uncompressed size of an imported ZIP",
  } as SettingDef<number>,
};

/**
 * Every setting of the config service, with the endpoint settings the process runner derives from its name
 * (`gov.config-service.url|port|host|grpc-port`): what the README's settings table documents.
 */
export const configSettings = { ...configModuleSettings, ...endpointSettings("config", CONFIG_PORTS) };

export interface ConfigLimits {
  maxContentBytes: number;
  maxZipBytes: number;
  maxZipEntries: number;
  maxZipUncompressedBytes: number;
}
