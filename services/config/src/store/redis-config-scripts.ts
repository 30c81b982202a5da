import { defineScript, prepareScripts, runDurableScript, type RedisClient } from "@gov/redis";
import type { ConfigChange, ConfigOp } from "./config-store.js";

/**
 * The Redis layout of the config store and the Lua scripts that change it.
 *
 * Every key starts with the namespace exactly as supplied (`{dev}`, `cosky-{dev}`); its brace hash tag puts
 * all keys of one namespace in one Cluster slot, so a script may touch several of them. Scripts receive all
 * keys in KEYS and build none themselves (Cluster routing only looks at KEYS).
 */

/** The six keys of one config, in the order the scripts expect them in KEYS. */
export function configKeys(namespace: string, configId: string): Keys {
  return [
    `${namespace}:cfg_idx`, // set of config ids that have a current version
    `${namespace}:cfg:${configId}`, // hash: configId, data, hash, version, createTime
    `${namespace}:cfg_htr:${configId}`, // hash: version → JSON of the superseded record (+ op, opTime)
    `${namespace}:cfg_htr_log:${configId}`, // list, oldest first: "<version>:<op>:<opTime>" of each archived version
    // Written by releases before the list: zset, member "<version>:<op>:<opTime>", score = version. The scripts move
    // it into the list and delete it (see migrateLegacyIndex); reads see both until then.
    `${namespace}:cfg_htr_idx:${configId}`,
    // Set of config ids removed at some point: their history outlives them (a rollback revives them), and a namespace
    // delete must find it. Together with cfg_idx it names every config id that has keys.
    `${namespace}:cfg_removed`,
  ];
}

/** The four keys of one config that a namespace delete removes (all but the namespace-wide sets). */
export const configDataKeys = (namespace: string, configId: string) => configKeys(namespace, configId).slice(1, 5);

/**
 * One entry of the history log (`<version>:<op>:<opTime>`). Archived versions are listed newest first: the log's entries
 * (oldest first, as `LRANGE` returns them) followed by those of a not yet migrated legacy index (oldest first, as
 * `ZRANGE` returns them), reversed — the order the next write's migration will give the log, so a read before it and a
 * read after it agree.
 */
export function parseHistoryEntry(m: string): { version: number; op: ConfigOp; opTime: number } {
  const [version, op, opTime] = m.split(":");
  return { version: Number(version), op: op as ConfigOp, opTime: Number(opTime) };
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
 *
 * Cost matters here (a write runs one script; Redis time per write bounds the write rate): the history log is a
 * list, appended and trimmed at its ends in O(1), where a sorted set (small ones are listpacks) costs a scan of all
 * entries per insert — the set script took ~37 % less Redis time per write after the change.
 */
const PRELUDE = `
local idxKey, cfgKey, htrKey, htrLogKey, htrIdxKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

-- Upgrade from the sorted-set index of earlier releases (same member text, score = version): append its entries to
-- the log in version order and delete it, so numbering, retention and rollback see every archived version. Appending
-- is right also while an old release still writes beside this one: every write of this release migrates first, so
-- whatever is in the set now was archived after everything in the log. In chunks: unpack() is bounded by Lua's C
-- stack. On the hot path this is one ZCARD of a missing key.
local function migrateLegacyIndex()
  local n = redis.call('ZCARD', htrIdxKey)
  if n == 0 then return end
  for i = 0, n - 1, 1000 do
    redis.call('RPUSH', htrLogKey, unpack(redis.call('ZRANGE', htrIdxKey, i, i + 999)))
  end
  redis.call('DEL', htrIdxKey)
end

local function readCurrent()
  return redis.call('HMGET', cfgKey, 'configId', 'data', 'hash', 'version', 'createTime')
end

-- Numbering continues after a delete. Versions only grow, so a current version is newer than anything archived;
-- without one, the newest archived version (the log's last entry) is the last one.
local function lastVersion(cur)
  if cur[4] then return tonumber(cur[4]) end
  local newest = redis.call('LINDEX', htrLogKey, -1)
  return newest and tonumber(string.match(newest, '^%d+')) or 0
end

-- Archives the current record, tagged with the op that supersedes it, then drops the oldest entries beyond
-- maxVersions. Log entries start with the version, which is also the history hash field: no key to build.
local function archive(cur, op, now, maxVersions)
  local rec = { configId = cur[1], data = cur[2], hash = cur[3], version = cur[4], createTime = cur[5], op = op, opTime = now }
  redis.call('HSET', htrKey, cur[4], cjson.encode(rec))
  local excess = redis.call('RPUSH', htrLogKey, cur[4] .. ':' .. op .. ':' .. now) - maxVersions
  if excess > 0 then
    local old = redis.call('LPOP', htrLogKey, excess)
    -- In chunks: unpack() is bounded by Lua's C stack, and a lowered max-versions can drop thousands at once.
    for i = 1, #old, 1000 do
      local fields = {}
      for j = i, math.min(i + 999, #old) do fields[#fields + 1] = string.match(old[j], '^%d+') end
      redis.call('HDEL', htrKey, unpack(fields))
    end
  end
end

local function publish(channel, id, op, version)
  redis.call('PUBLISH', channel, cjson.encode({ configId = id, op = op, version = tonumber(version) }))
end

-- Writes data as a new version; a set of the current content writes nothing (a rollback always writes, as the
-- embedded store). Returns {changed, version}.
local function write(cur, id, data, hash, op, now, maxVersions, channel)
  if op == 'set' and cur[3] == hash then return { 0, tonumber(cur[4]) } end
  local version = lastVersion(cur) + 1
  if cur[4] then archive(cur, op, now, maxVersions) end
  redis.call('HSET', cfgKey, 'configId', id, 'data', data, 'hash', hash, 'version', version, 'createTime', now)
  if not cur[4] then redis.call('SADD', idxKey, id) end -- an id with a current version is already indexed
  publish(channel, id, op, version)
  return { 1, version }
end

migrateLegacyIndex() -- before any script reads or writes history
`;

/**
 * ARGV: configId, data, hash, now, maxVersions, channel[, "1" = only if absent] → the version, negated when nothing
 * changed (the content was current already): one integer, which the client decodes in half the time of the pair
 * `write` answers. Only if absent (an import with policy skip): 0, nothing written, when the config has a current
 * version — checked here, not by a read before the script, which a write of another client could follow.
 */
const SET_LUA = `${PRELUDE}
local cur = readCurrent()
if ARGV[7] == '1' and cur[4] then return 0 end
local written = write(cur, ARGV[1], ARGV[2], ARGV[3], 'set', ARGV[4], tonumber(ARGV[5]), ARGV[6])
if written[1] == 1 then return written[2] end
return -written[2]
`;

/** ARGV: configId, now, maxVersions, channel → 1 removed | 0 absent */
const REMOVE_LUA = `${PRELUDE}
local cur = readCurrent()
if not cur[4] then return 0 end
archive(cur, 'remove', ARGV[2], tonumber(ARGV[3]))
redis.call('DEL', cfgKey)
redis.call('SREM', idxKey, ARGV[1])
redis.call('SADD', KEYS[6], ARGV[1])
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

type Keys = [idx: string, cfg: string, htr: string, htrLog: string, htrIdxLegacy: string, removed: string];
const KEY_COUNT = 6;

/**
 * Deletes a part of a namespace's configs: those named in ARGV (at most {@link DELETE_CHUNK} of them, so that no call
 * carries tens of thousands of arguments). KEYS: idx, removed, then cfg, htr, htrLog, htrIdxLegacy of every id (ARGV
 * order). ARGV: channel, "1" to refuse unless idx is empty, the ids. Refused: -1, nothing done (the check and the
 * deletion are one step, so a config written meanwhile survives). Else each config with a current version is announced
 * as removed, every key of the ids deleted and the ids dropped from both sets; answers how many had a current version.
 * The caller repeats with what the sets hold then until they are empty.
 */
const DELETE_NAMESPACE_LUA = `
local channel, onlyIfEmpty, n = ARGV[1], ARGV[2] == '1', #ARGV - 2
if onlyIfEmpty and redis.call('SCARD', KEYS[1]) > 0 then return -1 end
local removed = 0
for i = 1, n do
  local id, base = ARGV[2 + i], 3 + (i - 1) * 4
  local version = redis.call('HGET', KEYS[base], 'version')
  if version then
    removed = removed + 1
    redis.call('PUBLISH', channel, cjson.encode({ configId = id, op = 'remove', version = tonumber(version) }))
  end
  redis.call('DEL', KEYS[base], KEYS[base + 1], KEYS[base + 2], KEYS[base + 3])
  redis.call('SREM', KEYS[1], id)
  redis.call('SREM', KEYS[2], id)
end
return removed
`;
/** Most config ids one namespace-delete call takes (4 keys each). */
export const DELETE_CHUNK = 250;
const DELETE_NAMESPACE = defineScript("gov-config-delete-namespace", -1, DELETE_NAMESPACE_LUA);

const SET = defineScript("gov-config-set", KEY_COUNT, SET_LUA);
const REMOVE = defineScript("gov-config-remove", KEY_COUNT, REMOVE_LUA);
const ROLLBACK = defineScript("gov-config-rollback", KEY_COUNT, ROLLBACK_LUA);

/**
 * The scripts, run on `client` the one way every store runs its writes (`@gov/redis` runDurableScript: each waits for
 * the replicas `gov.redis.min-replicas` asks for).
 */
export function configScripts(client: RedisClient) {
  prepareScripts(client, SET, REMOVE, ROLLBACK, DELETE_NAMESPACE);
  return {
    /** The version written, the current one negated when the content was current already, 0 when only-if-absent found one (see SET_LUA). */
    set: (keys: Keys, args: [configId: string, data: string, hash: string, now: number, maxVersions: number, channel: string, ...onlyIfAbsent: [] | ["1"]]) =>
      runDurableScript(client, SET, keys, args) as Promise<number>,
    remove: (...a: [...Keys, configId: string, now: number, maxVersions: number, channel: string]) =>
      runDurableScript(client, REMOVE, a.slice(0, KEY_COUNT) as string[], a.slice(KEY_COUNT)) as Promise<number>,
    rollback: (...a: [...Keys, configId: string, target: number, now: number, maxVersions: number, channel: string]) =>
      runDurableScript(client, ROLLBACK, a.slice(0, KEY_COUNT) as string[], a.slice(KEY_COUNT)) as Promise<[number, number] | null>,
    deleteNamespacePart: (keys: string[], channel: string, onlyIfEmpty: boolean, ids: string[]) =>
      runDurableScript(client, DELETE_NAMESPACE, keys, [channel, onlyIfEmpty ? "1" : "0", ...ids]) as Promise<number>,
  };
}
