import type { Result } from "ioredis";
import type { RedisClient } from "@gov/redis";
import type { ConfigChange, ConfigOp } from "./config-store.js";

/**
 * The Redis layout of the config store and the Lua scripts that change it.
 *
 * Every key starts with the namespace exactly as supplied (`{dev}`, `cosky-{dev}`); its brace hash tag puts
 * all keys of one namespace in one Cluster slot, so a script may touch several of them. Scripts receive all
 * keys in KEYS and build none themselves (Cluster routing only looks at KEYS).
 */

/** The four keys of one config, in the order the scripts expect them in KEYS. */
export function configKeys(namespace: string, configId: string): [idx: string, cfg: string, htr: string, htrIdx: string] {
  return [
    `${namespace}:cfg_idx`, // set of config ids that have a current version
    `${namespace}:cfg:${configId}`, // hash: configId, data, hash, version, createTime
    `${namespace}:cfg_htr:${configId}`, // hash: version → JSON of the superseded record (+ op, opTime)
    `${namespace}:cfg_htr_idx:${configId}`, // zset: member "<version>:<op>:<opTime>", score = version
  ];
}

const EVENT_SUFFIX = ":cfg_evt";
/** Channel of a namespace's change events; message JSON `{configId, op, version}`. */
export const eventChannel = (namespace: string) => `${namespace}${EVENT_SUFFIX}`;
/** One PSUBSCRIBE pattern sees every namespace (classic Pub/Sub is broadcast to all Cluster nodes). */
export const EVENT_PATTERN = `*${EVENT_SUFFIX}`;

/** The change a script published (namespace from the channel), or undefined for a message that is not ours. */
export function parseChangeEvent(channel: string, message: string): ConfigChange | undefined {
  if (!channel.endsWith(EVENT_SUFFIX)) return undefined;
  try {
    const m = JSON.parse(message) as { configId: unknown; op: ConfigOp; version: unknown };
    return { namespace: channel.slice(0, -EVENT_SUFFIX.length), configId: String(m.configId), op: m.op, version: Number(m.version) };
  } catch {
    return undefined;
  }
}

/**
 * Shared by all scripts. Numbers read from Redis stay strings in the archived JSON (cjson would round
 * epoch milliseconds beyond 14 digits); the JS side converts them.
 */
const PRELUDE = `
local idxKey, cfgKey, htrKey, htrIdxKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

local function readCurrent()
  return redis.call('HMGET', cfgKey, 'configId', 'data', 'hash', 'version', 'createTime')
end

-- max(current version, newest archived version): numbering continues after a delete.
local function lastVersion(cur)
  local top = redis.call('ZREVRANGE', htrIdxKey, 0, 0, 'WITHSCORES')
  return math.max(tonumber(cur[4] or 0), tonumber(top[2] or 0))
end

-- Archives the current record, tagged with the op that supersedes it, then drops the oldest entries
-- beyond maxVersions. The zset score is the version, which is also the history hash field: no key to build.
local function archive(cur, op, now, maxVersions)
  local rec = { configId = cur[1], data = cur[2], hash = cur[3], version = cur[4], createTime = cur[5], op = op, opTime = now }
  redis.call('HSET', htrKey, cur[4], cjson.encode(rec))
  redis.call('ZADD', htrIdxKey, cur[4], cur[4] .. ':' .. op .. ':' .. now)
  local excess = redis.call('ZCARD', htrIdxKey) - maxVersions
  if excess > 0 then
    local old = redis.call('ZRANGE', htrIdxKey, 0, excess - 1, 'WITHSCORES')
    for i = 2, #old, 2 do redis.call('HDEL', htrKey, old[i]) end
    redis.call('ZREMRANGEBYRANK', htrIdxKey, 0, excess - 1)
  end
end

local function publish(channel, id, op, version)
  redis.call('PUBLISH', channel, cjson.encode({ configId = id, op = op, version = tonumber(version) }))
end

-- Writes data as a new version unless it equals the current content. Returns {changed, version}.
local function write(cur, id, data, hash, op, now, maxVersions, channel)
  if cur[3] == hash then return { 0, tonumber(cur[4]) } end
  local version = lastVersion(cur) + 1
  if cur[4] then archive(cur, op, now, maxVersions) end
  redis.call('HSET', cfgKey, 'configId', id, 'data', data, 'hash', hash, 'version', version, 'createTime', now)
  redis.call('SADD', idxKey, id)
  publish(channel, id, op, version)
  return { 1, version }
end
`;

/** ARGV: configId, data, hash, now, maxVersions, channel → {changed 0|1, version} */
const SET_LUA = `${PRELUDE}
return write(readCurrent(), ARGV[1], ARGV[2], ARGV[3], 'set', ARGV[4], tonumber(ARGV[5]), ARGV[6])
`;

/** ARGV: configId, now, maxVersions, channel → 1 removed | 0 absent */
const REMOVE_LUA = `${PRELUDE}
local cur = readCurrent()
if not cur[4] then return 0 end
archive(cur, 'remove', ARGV[2], tonumber(ARGV[3]))
redis.call('DEL', cfgKey)
redis.call('SREM', idxKey, ARGV[1])
publish(ARGV[4], ARGV[1], 'remove', cur[4])
return 1
`;

/** ARGV: configId, targetVersion, now, maxVersions, channel → {changed, version} | nil when the target is unknown */
const ROLLBACK_LUA = `${PRELUDE}
local cur = readCurrent()
local data, hash
if cur[4] and cur[4] == ARGV[2] then
  data, hash = cur[2], cur[3]
else
  local archived = redis.call('HGET', htrKey, ARGV[2])
  if not archived then return false end
  local rec = cjson.decode(archived)
  data, hash = rec.data, rec.hash
end
return write(cur, ARGV[1], data, hash, 'rollback', ARGV[3], tonumber(ARGV[4]), ARGV[5])
`;

type Keys = [idx: string, cfg: string, htr: string, htrIdx: string];

declare module "ioredis" {
  interface RedisCommander<Context> {
    govConfigSet(...args: [...Keys, configId: string, data: string, hash: string, now: number, maxVersions: number, channel: string]): Result<[number, number], Context>;
    govConfigRemove(...args: [...Keys, configId: string, now: number, maxVersions: number, channel: string]): Result<number, Context>;
    govConfigRollback(...args: [...Keys, configId: string, target: number, now: number, maxVersions: number, channel: string]): Result<[number, number] | null, Context>;
  }
}

/** Registers the scripts on a client once (ioredis sends EVALSHA and falls back to EVAL after a restart). */
export function defineConfigScripts(client: RedisClient): void {
  if (typeof (client as Partial<RedisClient>).govConfigSet === "function") return;
  client.defineCommand("govConfigSet", { numberOfKeys: 4, lua: SET_LUA });
  client.defineCommand("govConfigRemove", { numberOfKeys: 4, lua: REMOVE_LUA });
  client.defineCommand("govConfigRollback", { numberOfKeys: 4, lua: ROLLBACK_LUA });
}
