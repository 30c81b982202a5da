import { parseBytes, parseInteger, type SettingDef } from "@gov/settings";

/** Settings of the gateway process (contract §3, §8). */
export const gatewaySettings = {
  port: { name: "PORT", parse: parseInteger(0, 65535), default: 8080, doc: "port of the REST gateway (and, in the all-in-one process, of Connect/gRPC)" } as SettingDef<number>,
  grpcPort: {
    name: "gov.grpc.port",
    parse: parseInteger(0, 65535),
    default: 9090,
    doc: "h2c port for gRPC clients of the services this process runs (all-in-one); Connect and gRPC-Web use PORT",
  } as SettingDef<number>,
  host: { name: "HOST", parse: (s: string) => s.trim(), default: "0.0.0.0", doc: "address the gateway binds to" } as SettingDef<string>,
  configServiceUrl: {
    name: "gov.config-service.url",
    parse: (s: string) => {
      if (!/^https?:\/\/[^/]+/.test(s.trim())) throw new Error(`"${s}" is not an http(s) URL`);
      return s.trim().replace(/\/$/, "");
    },
    doc: "URL of a remote config service (`http://host:8091`); unset = run it inside the gateway process",
  } as SettingDef<string>,
  maxJsonBody: { name: "gov.limits.json-body", parse: parseBytes, default: 1024 * 1024, doc: "largest JSON (or raw config) request body" } as SettingDef<number>,
};
