import { idgenConfigFromSettings, InvalidSettingError, type IdGenConfig } from "@gov/idgen";
import { parseBoolean, parseEnum, rawSetting, SettingsError, type SettingDef, type SettingsSources } from "@gov/settings";

/** The endpoints the monitor can expose on the management listener (`management.endpoints.web.exposure.include`). */
export const MONITOR_ENDPOINTS = ["health", "idgen", "idgenGenerator", "idgenStringGenerator"] as const;
export type MonitorEndpoint = (typeof MONITOR_ENDPOINTS)[number];

function parseExposure(raw: string): MonitorEndpoint[] {
  const names = raw.split(",").map((s) => s.trim()).filter(Boolean);
  if (names.includes("*")) return [...MONITOR_ENDPOINTS];
  for (const n of names) {
    if (!(MONITOR_ENDPOINTS as readonly string[]).includes(n)) throw new Error(`"${n}" is not an endpoint: use ${MONITOR_ENDPOINTS.join(", ")} or *`);
  }
  return names as MonitorEndpoint[];
}

function parseToken(raw: string): string {
  const token = raw.trim();
  // a short shared secret is guessable; the management port is an administrative interface
  if (token.length < 16) throw new Error("the token is shorter than 16 characters: use a long random string (e.g. `openssl rand -hex 24`)");
  return token;
}

/** Settings of the monitor, read by every process (contract §9). */
export const monitorSettings = {
  exposure: {
    name: "management.endpoints.web.exposure.include",
    parse: parseExposure,
    default: ["health", "idgen"] as MonitorEndpoint[],
    doc: "management endpoints served: `health`, `idgen`, `idgenGenerator`, `idgenStringGenerator` (comma-separated or a YAML list; `*` = all). The id-generating operations are off unless listed",
  } as SettingDef<MonitorEndpoint[]>,
  showDetails: {
    name: "management.endpoint.health.show-details",
    parse: parseEnum("when-authorized", "always", "never"),
    default: "when-authorized",
    doc: "who sees the details (error, time) of the `machineId` health component: `when-authorized` (callers with `management.token` or a JWT), `always`, `never`",
  } as SettingDef<"when-authorized" | "always" | "never">,
  deleteEnabled: {
    name: "idgen.actuator.delete.enabled",
    parse: parseBoolean,
    default: false,
    doc: "`true` lets an authorized caller `DELETE /actuator/idgen/{name}` (stops that generator and its prefetch); otherwise 405",
  } as SettingDef<boolean>,
  token: {
    name: "management.token",
    parse: parseToken,
    doc: "bearer token (≥ 16 characters) that makes a caller of the management listener an admin: health details, id operations, DELETE. Unset = only JWTs of the security service authorize",
  } as SettingDef<string>,
  namespace: {
    name: "idgen.namespace",
    parse: (raw: string) => raw.trim(),
    doc: "namespace of this process's machine-id lease and segment counters; default the application name (`gov` for every process of the product: one pool of machine ids, so no two processes issue the same id)",
  } as SettingDef<string>,
};

/**
 * The `idgen.*` setting names the library reads, found by letting it read an empty map through a recording proxy:
 * the library owns its settings, so this list cannot drift from it.
 */
function idgenSettingNames(): string[] {
  const names = new Set<string>();
  const recorder = new Proxy({} as Record<string, string | undefined>, {
    get(_t, key) {
      if (typeof key === "string") names.add(key);
      return undefined;
    },
  });
  idgenConfigFromSettings(recorder);
  return [...names];
}

/**
 * The library's configuration from the process's sources (file keys `idgen.…`, environment `IDGEN_…`; the environment
 * wins), with `idgen.namespace` defaulting to `application`. A bad value throws, naming the setting.
 */
export function idgenConfigFromSources(sources: SettingsSources, application: string): IdGenConfig {
  const flat: Record<string, string | undefined> = {};
  const from = new Map<string, string>();
  for (const name of idgenSettingNames()) {
    const given = rawSetting(name, sources); // an empty IDGEN_… variable does not hide the file's value
    if (given === undefined) continue;
    flat[name] = given.raw;
    from.set(name, given.from);
  }
  flat["idgen.namespace"] ??= application;
  try {
    return idgenConfigFromSettings(flat);
  } catch (err) {
    // the library names the setting; the operator also needs to know where its value came from, as for gov.* ones
    if (!(err instanceof InvalidSettingError)) throw err;
    const where = from.get(err.setting);
    throw where ? new SettingsError(`${err.message} (from ${where})`) : err;
  }
}
