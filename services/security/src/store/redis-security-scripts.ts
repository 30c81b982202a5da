import { defineScript } from "@gov/redis";
import type { SecurityChange } from "./security-store.js";

/**
 * The Redis layout of the security store, all in the system namespace `ns` (contract §2), whose `{tag}` puts every key
 * in one Cluster slot:
 *
 * - `ns:sec_users` set of usernames; `ns:sec_user:<name>` hash (salt, hash, roles JSON, locked, lockedUntil, failures,
 *   tokensAfter);
 * - `ns:sec_roles` hash role name → `{desc, bindings}` JSON; `ns:sec_roles_removing` set of the roles whose removal
 *   has begun and not finished (see REMOVE_ROLE);
 * - `ns:sec_audit` list of entry JSON, newest first, trimmed to the retention; `ns:sec_audit_open` hash id → entry
 *   JSON of calls under way (their outcome replaces them in the list);
 * - `ns:sec_jwt_key` the generated JWT key.
 *
 * Every change publishes `{kind, name}` on `ns:sec_evt`, which every replica's caches follow.
 */
export function securityKeys(ns: string) {
  return {
    users: `${ns}:sec_users`,
    user: (name: string) => `${ns}:sec_user:${name}`,
    roles: `${ns}:sec_roles`,
    rolesRemoving: `${ns}:sec_roles_removing`,
    audit: `${ns}:sec_audit`,
    auditOpen: `${ns}:sec_audit_open`,
    jwtKey: `${ns}:sec_jwt_key`,
    channel: `${ns}:sec_evt`,
  };
}

export function parseSecurityEvent(_channel: string, message: string): SecurityChange | undefined {
  try {
    const m = JSON.parse(message) as { kind?: unknown; name?: unknown };
    if ((m.kind === "user" || m.kind === "role") && typeof m.name === "string") return { kind: m.kind, name: m.name };
  } catch {
    // not ours
  }
  return undefined;
}

const PUBLISH = `local function publish(kind, name) redis.call('PUBLISH', ARGV[1], cjson.encode({ kind = kind, name = name })) end`;

/** KEYS users, user; ARGV channel, name, then field/value pairs. 0 when the user exists. */
export const ADD_USER = defineScript(
  "sec_add_user",
  2,
  `${PUBLISH}
if redis.call('SADD', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], unpack(ARGV, 3))
publish('user', ARGV[2])
return 1`,
);

/** KEYS users, user; ARGV channel, name, then field/value pairs. 0 when there is no such user. */
export const UPDATE_USER = defineScript(
  "sec_update_user",
  2,
  `${PUBLISH}
if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('HSET', KEYS[2], unpack(ARGV, 3))
publish('user', ARGV[2])
return 1`,
);

/**
 * KEYS users, user, roles; ARGV channel, name, roles JSON, then the role names that must exist. 1 bound, 0 no such
 * user, or the first missing role's name (nothing written): the check and the write are one step, so a role removed
 * meanwhile (REMOVE_ROLE unbinds only the users holding it when it runs) is never left bound.
 */
export const BIND_ROLES = defineScript(
  "sec_bind_roles",
  3,
  `${PUBLISH}
if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0 then return 0 end
for i = 4, #ARGV do
  if redis.call('HEXISTS', KEYS[3], ARGV[i]) == 0 then return ARGV[i] end
end
redis.call('HSET', KEYS[2], 'roles', ARGV[3])
publish('user', ARGV[2])
return 1`,
);

/** KEYS users, user; ARGV channel, name. */
export const REMOVE_USER = defineScript(
  "sec_remove_user",
  2,
  `${PUBLISH}
if redis.call('SREM', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('DEL', KEYS[2])
publish('user', ARGV[2])
return 1`,
);

/**
 * KEYS users, user; ARGV channel, name, maxFailures, lockUntil, now. The attempt's number (1 … maxFailures), -1 locked
 * (already, or by this attempt: one more than maxFailures), 0 no such user. See SecurityStore.chargeAttempt.
 */
export const CHARGE_ATTEMPT = defineScript(
  "sec_charge_attempt",
  2,
  `${PUBLISH}
if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 0 then return 0 end
local state = redis.call('HMGET', KEYS[2], 'locked', 'lockedUntil')
if state[1] == '1' or (tonumber(state[2]) or 0) > tonumber(ARGV[5]) then return -1 end
local n = redis.call('HINCRBY', KEYS[2], 'failures', 1)
if n > tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[2], 'failures', 0, 'lockedUntil', ARGV[4])
  n = -1
end
publish('user', ARGV[2])
return n`,
);

/** KEYS roles, removing; ARGV channel, name, JSON. -1 (nothing written): the name's removal has not finished. */
export const SET_ROLE = defineScript(
  "sec_set_role",
  2,
  `${PUBLISH}
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 then return -1 end
local n = redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
publish('role', ARGV[2])
return n`,
);

/**
 * A role is removed in three steps, so that no script declares more keys than one part of the users (a role held by
 * 100,000 users is removed in parts of {@link ROLE_UNBIND_PART}), and still no user keeps a binding that a role created
 * later under the same name would honour:
 * 1. REMOVE_ROLE deletes the role (no reader finds it from here: it grants nothing, and BIND_ROLES refuses it) and
 *    marks its name as being removed;
 * 2. UNBIND_ROLE drops it from the users read after step 1, a part at a time (nobody can gain it meanwhile);
 * 3. ROLE_REMOVED lifts the mark.
 * SET_ROLE refuses a marked name: a removal that did not finish (its process died) is finished by removing the role
 * again, which step 1 allows for a marked name.
 *
 * KEYS roles, removing; ARGV channel, name. 1: removed now or left unfinished before; 0: no such role.
 */
export const REMOVE_ROLE = defineScript(
  "sec_remove_role",
  2,
  `${PUBLISH}
local removed = redis.call('HDEL', KEYS[1], ARGV[2])
if removed == 0 and redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 0 then return 0 end
redis.call('SADD', KEYS[2], ARGV[2])
if removed == 1 then publish('role', ARGV[2]) end
return 1`,
);

/** Users per UNBIND_ROLE call. */
export const ROLE_UNBIND_PART = 1000;

/** KEYS the users' keys; ARGV channel, role name, then the users' names in the keys' order. Drops the role from each. */
export const UNBIND_ROLE = defineScript(
  "sec_unbind_role",
  -1,
  `${PUBLISH}
for i = 1, #KEYS do
  local json = redis.call('HGET', KEYS[i], 'roles')
  if json then
    local ok, roles = pcall(cjson.decode, json)
    if ok and type(roles) == 'table' then
      local kept, dropped = {}, false
      for _, r in ipairs(roles) do
        if r == ARGV[2] then dropped = true else kept[#kept + 1] = r end
      end
      if dropped then
        redis.call('HSET', KEYS[i], 'roles', #kept == 0 and '[]' or cjson.encode(kept))
        publish('user', ARGV[i + 2])
      end
    end
  end
end
return 1`,
);

/** KEYS removing; ARGV the role name. The removal is complete. */
export const ROLE_REMOVED = defineScript("sec_role_removed", 1, "return redis.call('SREM', KEYS[1], ARGV[1])");

/**
 * KEYS audit, auditOpen; ARGV maxEntries, skipLoggedAmong, n, n ids, then the n entries oldest first. One call per
 * batch: the open entries of those ids go, the entries with their outcome are pushed, the log trimmed. With
 * skipLoggedAmong > 0 (a retry after an unknown outcome, so rare) an entry whose id is among that many newest entries
 * is not pushed again; an entry's JSON text starts with its id, so the check reads no more than that of each.
 */
export const APPEND_AUDIT = defineScript(
  "sec_append_audit",
  2,
  `local depth, n = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('HDEL', KEYS[2], unpack(ARGV, 4, 3 + n))
local entries
if depth > 0 then
  local logged = {}
  for _, e in ipairs(redis.call('LRANGE', KEYS[1], 0, depth - 1)) do
    local id = string.match(e, '^{"id":"([^"\\\\]*)"')
    if id then logged[id] = true end
  end
  entries = {}
  for i = 1, n do
    if not logged[ARGV[3 + i]] then entries[#entries + 1] = ARGV[3 + n + i] end
  end
else
  entries = { unpack(ARGV, 4 + n) }
end
if #entries > 0 then
  redis.call('LPUSH', KEYS[1], unpack(entries))
  redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[1]) - 1)
end
return #entries`,
);

/**
 * KEYS audit, auditOpen; ARGV maxEntries, marker, n, n ids, n statuses, n messages as JSON strings (oldest first). Each
 * open entry whose JSON text holds the marker (an open entry's status and message, then `"opTime":`) moves into the log
 * with that part replaced by its outcome; the text is what the client would have sent whole. Returns the ids not found
 * so (for the client to append whole).
 */
export const CLOSE_AUDIT = defineScript(
  "sec_close_audit",
  2,
  `local marker, n = ARGV[2], tonumber(ARGV[3])
local done, entries, missing = {}, {}, {}
for i = 1, n do
  local id = ARGV[3 + i]
  local open = redis.call('HGET', KEYS[2], id)
  local s, e
  if open then s, e = string.find(open, marker, 1, true) end
  if s then
    done[#done + 1] = id
    entries[#entries + 1] = string.sub(open, 1, s - 1) .. ',"status":' .. ARGV[3 + n + i] .. ',"msg":' .. ARGV[3 + 2 * n + i] .. ',"opTime":' .. string.sub(open, e + 1)
  else
    missing[#missing + 1] = id
  end
end
if #done > 0 then
  redis.call('HDEL', KEYS[2], unpack(done))
  redis.call('LPUSH', KEYS[1], unpack(entries))
  redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[1]) - 1)
end
return missing`,
);

/**
 * KEYS audit, auditOpen; ARGV before, maxEntries. Moves the open entries older than `before` (and any that do not
 * parse) into the log as they are; returns how many. The open hash holds only calls under way and the few left by a
 * killed process, so reading it whole is cheap.
 */
export const SWEEP_AUDIT = defineScript(
  "sec_sweep_audit",
  2,
  `local all = redis.call('HGETALL', KEYS[2])
local moved = {}
for i = 1, #all, 2 do
  local ok, e = pcall(cjson.decode, all[i + 1])
  if not ok or type(e) ~= 'table' or (tonumber(e.opTime) or 0) < tonumber(ARGV[1]) then
    moved[#moved + 1] = all[i + 1]
    redis.call('HDEL', KEYS[2], all[i])
  end
end
for i = 1, #moved, 500 do
  redis.call('LPUSH', KEYS[1], unpack(moved, i, math.min(i + 499, #moved)))
end
if #moved > 0 then redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1) end
return #moved`,
);

/**
 * KEYS audit, auditOpen; ARGV offset, limit, openBefore. One page as the reader orders it — the open entries started
 * before `openBefore` first, then the log — in one atomic read: {those open entries (all of them when the page starts
 * among them), how many entries in all, the log's part of the page}.
 */
export const READ_AUDIT_PAGE = defineScript(
  "sec_read_audit_page",
  2,
  `local offset, limit, before = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local shown = {}
for _, json in ipairs(redis.call('HVALS', KEYS[2])) do
  local ok, e = pcall(cjson.decode, json)
  if ok and type(e) == 'table' and (tonumber(e.opTime) or 0) < before then shown[#shown + 1] = json end
end
local open = #shown
local fromOpen = math.max(0, math.min(open, offset + limit) - offset)
local logOffset = math.max(0, offset - open)
local logLimit = limit - fromOpen
if fromOpen == 0 then shown = {} end
local logged = {}
if logLimit > 0 then logged = redis.call('LRANGE', KEYS[1], logOffset, logOffset + logLimit - 1) end
return {shown, open + redis.call('LLEN', KEYS[1]), logged}`,
);

/** KEYS jwtKey; ARGV candidate. The stored key, or the candidate stored now. */
export const JWT_KEY = defineScript(
  "sec_jwt_key",
  1,
  `local k = redis.call('GET', KEYS[1])
if k then return k end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]`,
);
