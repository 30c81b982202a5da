import { defineScript, prepareScripts, runDurableScript, runScript, type RedisClient } from "@gov/redis";
import type { RegistryChange, RegistryOp } from "./registry-store.js";

/**
 * The Redis layout of the registry store and the Lua scripts that change it.
 *
 * Every key starts with the namespace exactly as supplied (`{dev}`, `cosky-{dev}`); its brace hash tag puts all keys
 * of one namespace in one Cluster slot, so a script may touch several of them. Scripts receive all keys in KEYS and
 * build none themselves.
 *
 * One service's instances live in three keys, so that listing a service is one round trip whatever its size and a
 * metadata change rewrites only the metadata: `itc` (instance id → the record's JSON, without metadata or expiry),
 * `meta` (instance id → metadata JSON) and `ttl` (a sorted set: ephemeral instance id → ttlAt in epoch ms). An instance
 * is live while it is in `itc` and, if ephemeral, its `ttl` score is above now; fixed instances have no `ttl` entry.
 * Expired entries are removed by the next write to their service (each script starts with `dropExpired`) and by the
 * sweep, which also publish their "expired" events.
 */

/**
 * The six keys of one service, in the order the scripts expect them in KEYS. `svc_stat` (service id → live instances
 * as counted by the last sweep) and `svc_born` (service id → when it was created) are the namespace's, shared by its
 * services: the sweep writes the one, creating a service the other, deleting a service removes its field from both,
 * and reads take them whole (no scan).
 */
export function serviceKeys(namespace: string, serviceId: string): Keys {
  return [
    `${namespace}:svc_idx`, // set of service ids
    `${namespace}:svc_itc:${serviceId}`, // hash: instance id → record JSON
    `${namespace}:svc_meta:${serviceId}`, // hash: instance id → metadata JSON
    `${namespace}:svc_ttl:${serviceId}`, // zset: ephemeral instance id → ttlAt (epoch ms)
    `${namespace}:svc_stat`, // hash: service id → live instances at the last sweep
    `${namespace}:svc_born`, // hash: service id → epoch ms it was created (topology edges older than that are its predecessor's)
  ];
}

const EVENT_SUFFIX = ":reg_evt";
/** Channel of a namespace's registry events; message JSON `{serviceId, op, instanceId?}`. */
export const eventChannel = (namespace: string) => `${namespace}${EVENT_SUFFIX}`;
/** One PSUBSCRIBE pattern sees every namespace (classic Pub/Sub is broadcast to all Cluster nodes). */
export const EVENT_PATTERN = `*${EVENT_SUFFIX}`;

const OPS = new Set<RegistryOp>(["register", "renew", "deregister", "expired", "metadata", "service_add", "service_remove"]);

/** The change a script published (namespace from the channel), or undefined for a message that is not ours. */
export function parseRegistryEvent(channel: string, message: string): RegistryChange | undefined {
  if (!channel.endsWith(EVENT_SUFFIX)) return undefined;
  try {
    const m = JSON.parse(message) as { serviceId?: unknown; op?: unknown; instanceId?: unknown };
    if (typeof m.serviceId !== "string" || !OPS.has(m.op as RegistryOp)) return undefined;
    const change: RegistryChange = { namespace: channel.slice(0, -EVENT_SUFFIX.length), serviceId: m.serviceId, op: m.op as RegistryOp };
    if (typeof m.instanceId === "string") change.instanceId = m.instanceId;
    return change;
  } catch {
    return undefined;
  }
}

/** Shared by all instance scripts: KEYS = idx, itc, meta, ttl, stat, born; every script's ARGV[1] is the service id. */
const PRELUDE = `
local idxKey, itcKey, metaKey, ttlKey, statKey, bornKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local serviceId = ARGV[1]

local function publish(channel, op, instanceId)
  redis.call('PUBLISH', channel, cjson.encode({ serviceId = serviceId, op = op, instanceId = instanceId }))
end

-- Removes the service's instances that expired by now (in chunks, so one call stays short) and announces each.
local function dropExpired(now, channel)
  local dropped = 0
  while true do
    local gone = redis.call('ZRANGEBYSCORE', ttlKey, '-inf', now, 'LIMIT', 0, 500)
    if #gone == 0 then return dropped end
    redis.call('ZREM', ttlKey, unpack(gone))
    redis.call('HDEL', itcKey, unpack(gone))
    redis.call('HDEL', metaKey, unpack(gone))
    for _, id in ipairs(gone) do publish(channel, 'expired', id) end
    dropped = dropped + #gone
  end
end
`;

/** ARGV: serviceId, instanceId, recordJson, metadataJson, ttlAt ('' = fixed), now, channel → 1 */
const REGISTER_LUA = `${PRELUDE}
local id, channel = ARGV[2], ARGV[7]
dropExpired(ARGV[6], channel)
if redis.call('SADD', idxKey, serviceId) == 1 then
  redis.call('HSET', bornKey, serviceId, ARGV[6])
  publish(channel, 'service_add')
end
redis.call('HSET', itcKey, id, ARGV[3])
redis.call('HSET', metaKey, id, ARGV[4])
-- A fixed instance has no expiry: re-registering an ephemeral one as fixed removes it.
if ARGV[5] == '' then redis.call('ZREM', ttlKey, id) else redis.call('ZADD', ttlKey, ARGV[5], id) end
publish(channel, 'register', id)
return 1
`;

/** ARGV: serviceId, instanceId, now, channel → 1 removed | 0 unknown or expired */
const DEREGISTER_LUA = `${PRELUDE}
local id, channel = ARGV[2], ARGV[4]
dropExpired(ARGV[3], channel)
if redis.call('HDEL', itcKey, id) == 0 then return 0 end
redis.call('HDEL', metaKey, id)
redis.call('ZREM', ttlKey, id)
publish(channel, 'deregister', id)
return 1
`;

/**
 * ARGV: serviceId, instanceId, now, channel → the new ttlAt | -1 for a fixed instance | false when unknown or expired.
 * The ttl to extend by is the record's ttlMs (the JSON is written by the JS side, ttlMs first, as a plain integer).
 * The renewal is published only when less than half the ttl was left (see shouldPublishRenew).
 */
const RENEW_LUA = `${PRELUDE}
local id, now, channel = ARGV[2], tonumber(ARGV[3]), ARGV[4]
dropExpired(ARGV[3], channel)
local record = redis.call('HGET', itcKey, id)
if not record then return false end
local old = redis.call('ZSCORE', ttlKey, id)
if not old then return -1 end
local ttlMs = tonumber(string.match(record, '^{"ttlMs":(%d+)'))
local ttlAt = now + ttlMs
redis.call('ZADD', ttlKey, ttlAt, id)
if tonumber(old) - now < ttlMs / 2 then publish(channel, 'renew', id) end
return ttlAt
`;

/** ARGV: serviceId, instanceId, metadataJson, now, channel → 1 | 0 when unknown or expired */
const SET_METADATA_LUA = `${PRELUDE}
local id, channel = ARGV[2], ARGV[5]
dropExpired(ARGV[4], channel)
if redis.call('HEXISTS', itcKey, id) == 0 then return 0 end
redis.call('HSET', metaKey, id, ARGV[3])
publish(channel, 'metadata', id)
return 1
`;

/** ARGV: serviceId, now, channel → 1 removed | 0 unknown | 2 has live instances */
const DELETE_SERVICE_LUA = `${PRELUDE}
local channel = ARGV[3]
if redis.call('SISMEMBER', idxKey, serviceId) == 0 then return 0 end
dropExpired(ARGV[2], channel)
if redis.call('HLEN', itcKey) > 0 then return 2 end
redis.call('SREM', idxKey, serviceId)
redis.call('DEL', itcKey, metaKey, ttlKey)
redis.call('HDEL', statKey, serviceId)
redis.call('HDEL', bornKey, serviceId)
publish(channel, 'service_remove')
return 1
`;

/** ARGV: serviceId, channel, now → 1 created | 0 existed */
const PUT_SERVICE_LUA = `${PRELUDE}
if redis.call('SADD', idxKey, serviceId) == 0 then return 0 end
redis.call('HSET', bornKey, serviceId, ARGV[3])
publish(ARGV[2], 'service_add')
return 1
`;

/**
 * ARGV: serviceId, now, channel → how many expired instances were dropped. What remains is live, so its count is
 * recorded for the service stats (a service deleted meanwhile is not counted back in).
 */
const SWEEP_LUA = `${PRELUDE}
local dropped = dropExpired(ARGV[2], ARGV[3])
if redis.call('SISMEMBER', idxKey, serviceId) == 1 then redis.call('HSET', statKey, serviceId, redis.call('HLEN', itcKey)) end
return dropped
`;

/**
 * A service's instances, read at one instant. KEYS: itc, meta, ttl, then three fresh keys for their snapshot (see
 * snapshotKeys). ARGV: the most instances answered whole, the snapshot's lifetime in ms.
 *
 * Up to that many: `{0, itc's HGETALL, meta's HGETALL, ttl's ZRANGE WITHSCORES}`, as the listing always was. A larger
 * service: the three keys are copied (COPY: in this one script, so the copies hold the service as of one instant, and
 * no write ever reaches them) and `{1, the instance ids}` is answered, so that the caller reads the copies in pieces
 * (HMGET by id) and drops them. One reply of a 40,000-instance service took ioredis 70–100 ms to decode and the store
 * ~300 ms more to parse, in one turn of the event loop. A copy refused (OOM: maxmemory reached) falls back to the
 * whole reply: reads keep working, as they did, while writes are refused.
 */
const LIST_INSTANCES_LUA = `
local snapshot = false
if redis.call('HLEN', KEYS[1]) > tonumber(ARGV[1]) then
  snapshot = true
  for i = 1, 3 do
    local copied = redis.pcall('COPY', KEYS[i], KEYS[i + 3], 'REPLACE')
    if type(copied) ~= 'number' then snapshot = false break end
    if copied == 1 then redis.call('PEXPIRE', KEYS[i + 3], ARGV[2]) end
  end
  if snapshot then return { 1, redis.call('HKEYS', KEYS[1]) } end
  redis.call('DEL', KEYS[4], KEYS[5], KEYS[6])
end
return { 0, redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]), redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES') }
`;
const LIST_INSTANCES = defineScript("gov-registry-list-instances", 6, LIST_INSTANCES_LUA);

/**
 * Three keys for one snapshot of a service's itc, meta and ttl (see LIST_INSTANCES_LUA), unique to the read (`nonce`).
 * They begin as the service's keys do, up to and with the service id, so they carry its hash tag: one Cluster slot.
 */
export function snapshotKeys(namespace: string, serviceId: string, nonce: string): [itc: string, meta: string, ttl: string] {
  const at = `${namespace}:svc_snap:${serviceId}:${nonce}`;
  return [`${at}:itc`, `${at}:meta`, `${at}:ttl`];
}

type Keys = [idx: string, itc: string, meta: string, ttl: string, stat: string, born: string];
const KEY_COUNT = 6;

const REGISTER = defineScript("gov-registry-register", KEY_COUNT, REGISTER_LUA);
const DEREGISTER = defineScript("gov-registry-deregister", KEY_COUNT, DEREGISTER_LUA);
const RENEW = defineScript("gov-registry-renew", KEY_COUNT, RENEW_LUA);
const SET_METADATA = defineScript("gov-registry-set-metadata", KEY_COUNT, SET_METADATA_LUA);
const DELETE_SERVICE = defineScript("gov-registry-delete-service", KEY_COUNT, DELETE_SERVICE_LUA);
const PUT_SERVICE = defineScript("gov-registry-put-service", KEY_COUNT, PUT_SERVICE_LUA);
const SWEEP = defineScript("gov-registry-sweep", KEY_COUNT, SWEEP_LUA);

/**
 * Deletes a part of a namespace's services: those named in ARGV (at most {@link DELETE_CHUNK}, so that no call carries
 * tens of thousands of arguments). KEYS: idx, stat, born, then itc, meta, ttl of every service (ARGV order). ARGV:
 * channel, "1" to refuse unless idx is empty, the service ids. Refused: {-1, 0}, nothing done. Else each instance is
 * announced as deregistered and each service as removed, their keys deleted and their ids dropped from idx, stat and
 * born; once idx is empty the stat and born hashes go too. Answers {services, instances}; the caller repeats with what idx holds then until empty.
 */
const DELETE_NAMESPACE_LUA = `
local channel, onlyIfEmpty, n = ARGV[1], ARGV[2] == '1', #ARGV - 2
if onlyIfEmpty and redis.call('SCARD', KEYS[1]) > 0 then return { -1, 0 } end
local instances = 0
for i = 1, n do
  local serviceId, base = ARGV[2 + i], 4 + (i - 1) * 3
  for _, id in ipairs(redis.call('HKEYS', KEYS[base])) do
    redis.call('PUBLISH', channel, cjson.encode({ serviceId = serviceId, op = 'deregister', instanceId = id }))
    instances = instances + 1
  end
  redis.call('PUBLISH', channel, cjson.encode({ serviceId = serviceId, op = 'service_remove' }))
  redis.call('DEL', KEYS[base], KEYS[base + 1], KEYS[base + 2])
  redis.call('SREM', KEYS[1], serviceId)
  redis.call('HDEL', KEYS[2], serviceId)
  redis.call('HDEL', KEYS[3], serviceId)
end
if redis.call('SCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[2], KEYS[3]) end
return { n, instances }
`;
/** Most service ids one namespace-delete call takes (3 keys each). */
export const DELETE_CHUNK = 300;
const DELETE_NAMESPACE = defineScript("gov-registry-delete-namespace", -1, DELETE_NAMESPACE_LUA);

/** The keys a namespace delete passes: the namespace's index, stat and born hashes, then the three keys of each service. */
export function namespaceKeys(namespace: string, serviceIds: string[]): string[] {
  const [idx, , , , stat, born] = serviceKeys(namespace, "");
  return [idx, stat, born, ...serviceIds.flatMap((id) => serviceKeys(namespace, id).slice(1, 4))];
}

/**
 * The scripts, run on `client` the one way every store runs its writes (`@gov/redis` runDurableScript: each waits for
 * the replicas `gov.redis.min-replicas` asks for) — except renew and sweep. A renewal lost at a failover only leaves the
 * previous deadline in place, which the instance's next renewal (well within its TTL) moves again; a lost sweep is
 * redone by the next one. Renewals are the hottest write (every instance, every few seconds): waiting for a replica
 * on each would cost a round trip for nothing an instance can see.
 */
export function registryScripts(client: RedisClient) {
  prepareScripts(client, REGISTER, DEREGISTER, RENEW, SET_METADATA, DELETE_SERVICE, PUT_SERVICE, SWEEP, DELETE_NAMESPACE, LIST_INSTANCES);
  const run = (script: typeof REGISTER, keys: Keys, args: (string | number)[]) => runDurableScript(client, script, keys, args);
  const runVolatile = (script: typeof REGISTER, keys: Keys, args: (string | number)[]) => runScript(client, script, keys, args);
  return {
    register: (keys: Keys, serviceId: string, instanceId: string, record: string, metadata: string, ttlAt: number | undefined, now: number, channel: string) =>
      run(REGISTER, keys, [serviceId, instanceId, record, metadata, ttlAt === undefined ? "" : ttlAt, now, channel]),
    deregister: (keys: Keys, serviceId: string, instanceId: string, now: number, channel: string) =>
      run(DEREGISTER, keys, [serviceId, instanceId, now, channel]) as Promise<number>,
    renew: (keys: Keys, serviceId: string, instanceId: string, now: number, channel: string) =>
      runVolatile(RENEW, keys, [serviceId, instanceId, now, channel]) as Promise<number | null>,
    setMetadata: (keys: Keys, serviceId: string, instanceId: string, metadata: string, now: number, channel: string) =>
      run(SET_METADATA, keys, [serviceId, instanceId, metadata, now, channel]) as Promise<number>,
    deleteService: (keys: Keys, serviceId: string, now: number, channel: string) =>
      run(DELETE_SERVICE, keys, [serviceId, now, channel]) as Promise<number>,
    putService: (keys: Keys, serviceId: string, channel: string, now: number) => run(PUT_SERVICE, keys, [serviceId, channel, now]) as Promise<number>,
    sweep: (keys: Keys, serviceId: string, now: number, channel: string) => runVolatile(SWEEP, keys, [serviceId, now, channel]) as Promise<number>,
    /** A read: only its snapshot's copies are written (not durable, see LIST_INSTANCES_LUA). */
    listInstances: (keys: string[], wholeMax: number, snapshotTtlMs: number) =>
      runScript(client, LIST_INSTANCES, keys, [wholeMax, snapshotTtlMs]) as Promise<[0, string[], string[], string[]] | [1, string[]]>,
    deleteNamespacePart: (keys: string[], channel: string, onlyIfEmpty: boolean, serviceIds: string[]) =>
      runDurableScript(client, DELETE_NAMESPACE, keys, [channel, onlyIfEmpty ? "1" : "0", ...serviceIds]) as Promise<[number, number]>,
  };
}
