import { parseBoolean, parseDurationBetween, parseInteger, type SettingDef } from "@gov/settings";

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
  minReplicas: {
    name: "gov.redis.min-replicas",
    parse: parseInteger(0, 16),
    default: 0,
    doc: "replicas that must hold each config, registry and security write (`WAIT` on the write's connection) before it is acknowledged, so a master's crash loses no acknowledged write; 0 = do not wait",
  } as SettingDef<number>,
  replicaAckTimeout: {
    name: "gov.redis.replica-ack-timeout",
    parse: parseDurationBetween(1, 2000),
    default: 1000,
    doc: "longest wait for those replicas (up to 2s, under the 3 s Redis command timeout); a write they miss still succeeds (it is on the master), is counted in `gov_redis_under_replicated_writes_total` and logged once per episode; a machine id or id range they miss is not used",
  } as SettingDef<number>,
};
