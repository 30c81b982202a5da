import { defineScript } from "../redis-script.js";

/*
 * Machine-id lease scripts. Keys (all declared in KEYS, all tagged `{<namespace>}` so one slot holds them):
 *   itc_idx  HASH  lease key -> "machineId|leaseAt|lastStamp"
 *   adder    STRING the highest machine id ever handed out
 *   revert   HASH  machineId -> lastStamp (released ids, with the time the next owner must not go below)
 *   owner    HASH  lease key -> owner token (random per lease object, i.e. per process start)
 *   guard    HASH  lease key -> the holder's safe-guard duration T in ms (see HOLDER_GUARD). A hash of its own, not a
 *            fourth field of the entry: releases before it parse exactly three fields, and a process of such a release
 *            (a rollback of an upgrade) failed every distribution on an entry it could not parse.
 *
 * A lease key is the instance id, or `<instanceId>#<owner>` when another live lease already holds that instance id.
 * The owner token is what tells a process's own lease from a second process that happens to have the same instance
 * id (two containers on different hosts, both `172.17.0.2:1`): without it the second one was handed the first one's
 * machine id, and both renewed the same entry, issuing the same ids for as long as they ran.
 *
 * Two clocks on purpose:
 * - `leaseAt` (renewal time, compared for recycling) comes from Redis `TIME`. Every claimant then compares
 *   against the same clock, so a host whose clock runs fast cannot recycle a live lease early. Our own stop
 *   rule is measured locally on a monotonic clock from *before* the successful request was sent, so it always
 *   fires at or before the store-side expiry (minus the margin), whatever the skew — except across a suspend of the
 *   host, when the monotonic clock stands still and Redis TIME does not; so the rule is also kept on the owner's wall
 *   clock, where passing it only pauses the generators until a renewal confirms the lease (`MachineLease`, CHECKING).
 * - `lastStamp` is the owner's *generation* clock (passed in ARGV). It protects the next owner of the id
 *   against issuing timestamps the previous owner already used, which is a property of the hosts' clocks.
 * Scripts that call TIME are fine since Redis 5 (effect replication).
 */

const COMMON = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function parse(v)
  local a, b, c = string.match(v, '^(%-?%d+)|(%-?%d+)|(%-?%d+)$')
  return tonumber(a), tonumber(b), tonumber(c)
end
`;

/**
 * A lease is stale once not renewed for its *holder's* safe-guard duration (kept in the guard hash), and never before
 * the claimant's own: its holder stops issuing only `T − min(10 s, T/10)` after its last renewal by its own T. Judged
 * by the claimant's T alone, a process with a longer T — or with the guarder off (T forever: it never renews and never
 * stops) — had its live id recycled and issued the same ids as the claimant. Leases written by releases before the
 * guard hash count with the claimant's T.
 */
const HOLDER_GUARD = `
local function holderGuard(entryGuard, safeGuard)
  return math.max(tonumber(entryGuard) or safeGuard, safeGuard)
end
`;

/**
 * The last tick a lease not renewed for the safe-guard duration may have used: its owner stops issuing
 * T − min(10 s, T/10) after its last renewal (lease.ts, stopAfterMs).
 */
const STALE_STAMP = `
local function staleStamp(stamp, safeGuard)
  return stamp + safeGuard - math.min(10000, math.floor(safeGuard / 10))
end
`;

/**
 * KEYS itc_idx, adder, revert, owner, guard; ARGV instanceId, maxMachineId, safeGuardMs (whole ms), callerNow, owner,
 * maxWaitMs → {machineId, lastStamp, leaseKey} or {-1, -1, leaseKey}.
 */
export const distributeScript = defineScript(
  "idgen_machine_distribute",
  5,
  `${COMMON}${STALE_STAMP}${HOLDER_GUARD}
local instance = ARGV[1]
local maxId = tonumber(ARGV[2])
local safeGuard = tonumber(ARGV[3])
local callerNow = tonumber(ARGV[4])
local owner = ARGV[5]
local usableBy = callerNow + (tonumber(ARGV[6]) or 0)
local key = instance
local function hold(id, stamp)
  redis.call('HSET', KEYS[1], key, id .. '|' .. now .. '|' .. math.max(stamp, callerNow))
  redis.call('HSET', KEYS[4], key, owner)
  redis.call('HSET', KEYS[5], key, ARGV[3])
  return {id, stamp, key}
end
-- 1. self: the instance id's entry. Ours (a redistribution after a loss), or one whose owner has stopped issuing by
--    its stop rule (not renewed for T: a restart of this instance, once the old lease is stale) is taken back. A live
--    entry of another owner may be a second process with the same instance id: it keeps its id, and this lease goes
--    under a key of its own.
local own = redis.call('HGET', KEYS[1], instance)
if own then
  local id, leaseAt, stamp = parse(own)
  if redis.call('HGET', KEYS[4], instance) == owner then return hold(id, stamp) end
  local t = holderGuard(redis.call('HGET', KEYS[5], instance), safeGuard)
  if id <= maxId and leaseAt <= now - t then return hold(id, staleStamp(stamp, t)) end
  key = instance .. '#' .. owner
  local again = redis.call('HGET', KEYS[1], key)
  if again then
    local againId, _, againStamp = parse(again)
    return hold(againId, againStamp)
  end
end
-- 2. a released id the caller can use (its last timestamp no further ahead of the caller's clock than it may wait),
--    lowest first. One released by a host whose clock ran ahead is passed over while others are free: handed out
--    first, every new process refused to start on it, gave it back, and the next one took it again.
local pool = redis.call('HGETALL', KEYS[3])
local best, bestStamp, ahead, aheadStamp
for i = 1, #pool, 2 do
  local id, stamp = tonumber(pool[i]), tonumber(pool[i + 1])
  if id <= maxId then
    if stamp <= usableBy then
      if best == nil or id < best then best = id; bestStamp = stamp end
    elseif ahead == nil or stamp < aheadStamp then ahead = id; aheadStamp = stamp end
  end
end
if best then
  redis.call('HDEL', KEYS[3], tostring(best))
  return hold(best, bestStamp)
end
-- 3. a never-used id (skipping ids a re-established lease already holds)
local all = redis.call('HGETALL', KEYS[1])
local held = {}
for i = 2, #all, 2 do held[parse(all[i])] = true end
local adder = tonumber(redis.call('GET', KEYS[2]) or '-1')
while adder < maxId do
  adder = adder + 1
  redis.call('SET', KEYS[2], adder)
  if not held[adder] then return hold(adder, 0) end
end
-- 4. recycle the stalest lease not renewed for its holder's safe-guard duration (Redis clock). Its owner may have
--    issued ids until its stop rule fired, T - min(10 s, T/10) after its last renewal: the next owner must start after that.
local staleField, staleId, staleAt, staleStampValue, staleGuard
local guards = {} -- read once, not one HGET per lease
local guardPairs = redis.call('HGETALL', KEYS[5])
for i = 1, #guardPairs, 2 do guards[guardPairs[i]] = guardPairs[i + 1] end
for i = 1, #all, 2 do
  local id, leaseAt, stamp = parse(all[i + 1])
  local t = holderGuard(guards[all[i]], safeGuard)
  if id <= maxId and leaseAt <= now - t and (staleAt == nil or leaseAt < staleAt) then
    staleField = all[i]; staleId = id; staleAt = leaseAt; staleStampValue = stamp; staleGuard = t
  end
end
if staleField then
  redis.call('HDEL', KEYS[1], staleField)
  redis.call('HDEL', KEYS[4], staleField)
  redis.call('HDEL', KEYS[5], staleField)
  return hold(staleId, staleStamp(staleStampValue, staleGuard))
end
-- 5. nothing else: the released id the caller's clock is nearest to (it waits for it, or refuses to start)
if ahead then
  redis.call('HDEL', KEYS[3], tostring(ahead))
  return hold(ahead, aheadStamp)
end
return {-1, -1, key}
`,
);

/**
 * KEYS itc_idx, adder, revert, owner, guard; ARGV leaseKey, machineId, callerNow, owner, safeGuardMs → 1 renewed,
 * 2 re-established, 0 lost.
 * Lost: the entry holds another id, or another owner took it over (ours went stale and was recycled).
 * Re-establish: our entry vanished (store restarted empty, key evicted or deleted) but nobody else holds the id
 * and nobody released it since; then it is still safely ours, so we write it back (distribute skips held ids
 * when it hands out new ones, so the adder need not move).
 * A live lease cannot have been recycled meanwhile: we stop generating `min(10 s, T/10)` before anyone may.
 */
export const guardScript = defineScript(
  "idgen_machine_guard",
  5,
  `${COMMON}
local id = tonumber(ARGV[2])
local owner = ARGV[4]
local own = redis.call('HGET', KEYS[1], ARGV[1])
if own then
  local held, _, stamp = parse(own)
  if held ~= id then return 0 end
  local holder = redis.call('HGET', KEYS[4], ARGV[1])
  if holder and holder ~= owner then return 0 end
  redis.call('HSET', KEYS[1], ARGV[1], id .. '|' .. now .. '|' .. math.max(stamp, tonumber(ARGV[3])))
  redis.call('HSET', KEYS[4], ARGV[1], owner)
  redis.call('HSET', KEYS[5], ARGV[1], ARGV[5])
  return 1
end
if redis.call('HEXISTS', KEYS[3], tostring(id)) == 1 then return 0 end
local all = redis.call('HGETALL', KEYS[1])
for i = 2, #all, 2 do
  local held = parse(all[i])
  if held == id then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], id .. '|' .. now .. '|' .. ARGV[3])
redis.call('HSET', KEYS[4], ARGV[1], owner)
redis.call('HSET', KEYS[5], ARGV[1], ARGV[5])
return 2
`,
);

/** KEYS itc_idx, revert, owner, guard; ARGV leaseKey, machineId, callerNow, owner → 1 released, 0 nothing of ours to release. */
export const revertScript = defineScript(
  "idgen_machine_revert",
  4,
  `${COMMON}
local own = redis.call('HGET', KEYS[1], ARGV[1])
if not own then return 0 end
local id, _, stamp = parse(own)
if id ~= tonumber(ARGV[2]) then return 0 end
local holder = redis.call('HGET', KEYS[3], ARGV[1])
if holder and holder ~= ARGV[4] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[2], id, math.max(stamp, tonumber(ARGV[3])))
return 1
`,
);
