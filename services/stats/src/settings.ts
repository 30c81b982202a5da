import { parseBoolean, parseDurationBetween, type SettingDef } from "@gov/settings";
import { namespaceSettings } from "@gov/namespaces";
import { endpointSettings, sharedSettings } from "@gov/service-kit";

/** Ports of the stats service's own process (`npm run start:stats`). */
export const STATS_PORTS = { port: 8093, grpcPort: 9093 };
/** Ports of a stats worker's own process (`npm run start:worker`); several workers on one host set them to 0. */
export const WORKER_PORTS = { port: 8094, grpcPort: 9094 };

/** The shortest and longest edge ttl: an edge is written at most once a minute, so a shorter ttl would drop live edges. */
export const MIN_EDGE_TTL_MS = 60_000;
export const MAX_EDGE_TTL_MS = 30 * 24 * 60 * 60 * 1000;


/** What the stats worker reads (seed: Settings, Limits; contract §6). */
export const workerModuleSettings = {
  ...sharedSettings,
  ...namespaceSettings,
  mutexEnabled: {
    name: "mutex.redis.enabled",
    parse: parseBoolean,
    default: true,
    doc: "`true`: on Redis, only the holder of the cluster-wide `stat` mutex runs the statistics job (any number of workers); `false`: every worker runs it every period (one worker only)",
  } as SettingDef<boolean>,
  edgeTtl: {
    name: "gov.topology.edge-ttl",
    parse: parseDurationBetween(MIN_EDGE_TTL_MS, MAX_EDGE_TTL_MS),
    default: 24 * 60 * 60 * 1000,
    doc: "a topology edge not seen for this long disappears (1 m to 30 d)",
  } as SettingDef<number>,
};

/** What the stats module reads: the worker's settings (it runs the worker in its process too). */
export const statsModuleSettings = { ...workerModuleSettings };

/** Every setting of the stats service, with the endpoint settings the process runner derives from its name. */
export const statsSettings = { ...statsModuleSettings, ...endpointSettings("stats", STATS_PORTS) };
