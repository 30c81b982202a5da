import { parseBoolean, type SettingDef } from "@gov/settings";

/** Settings every service process reads (contract §2, §8). */
export const sharedSettings = {
  redisUrl: {
    name: "REDIS_URL",
    parse: (raw: string) => raw.trim(),
    doc: "`redis://host:port` (one server) or `redis-cluster://host:port,host:port` (a Cluster); unset = the embedded in-process store",
  } as SettingDef<string>,
  requireHashTag: {
    name: "gov.namespace.require-hash-tag",
    parse: parseBoolean,
    default: true,
    doc: "`false` lets namespaces without a `{tag}` through (standalone storage only; refused with a Cluster)",
  } as SettingDef<boolean>,
};
