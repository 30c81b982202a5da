import { parseBytes, parseInteger, type SettingDef } from "@gov/settings";
import { sharedSettings } from "@gov/service-kit";

/** Settings of the config service (contract §3, §4, §8). Each is documented in the root README. */
export const configSettings = {
  ...sharedSettings,
  maxVersions: {
    name: "gov.config.history.max-versions",
    parse: parseInteger(1, 100_000),
    default: 100,
    doc: "superseded versions kept per config; the oldest are dropped first",
  } as SettingDef<number>,
  maxContentBytes: {
    name: "gov.limits.config-content",
    parse: parseBytes,
    default: 1024 * 1024,
    doc: "largest config content (UTF-8 bytes)",
  } as SettingDef<number>,
  maxZipBytes: {
    name: "gov.limits.zip-upload",
    parse: parseBytes,
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
    parse: parseBytes,
    default: 64 * 1024 * 1024,
    doc: "largest total uncompressed size of an imported ZIP",
  } as SettingDef<number>,
  port: {
    name: "gov.config-service.port",
    parse: parseInteger(0, 65535),
    default: 8091,
    doc: "HTTP/1.1 port (Connect, gRPC-Web) of the config service when it runs as its own process (`npm run start:config`)",
  } as SettingDef<number>,
  host: {
    name: "gov.config-service.host",
    parse: (raw: string) => raw.trim(),
    default: "127.0.0.1",
    doc: "address the config service binds to when it runs as its own process (`0.0.0.0` to serve other hosts)",
  } as SettingDef<string>,
  grpcPort: {
    name: "gov.config-service.grpc-port",
    parse: parseInteger(0, 65535),
    default: 9091,
    doc: "h2c port (gRPC) of the config service when it runs as its own process",
  } as SettingDef<number>,
};

export interface ConfigLimits {
  maxContentBytes: number;
  maxZipBytes: number;
  maxZipEntries: number;
  maxZipUncompressedBytes: number;
}
