import { defineScript } from "../redis-script.js";

/*
 * Machine-id lease scripts. Keys (all declared in KEYS, all tagged `{<namespace>}` so one slot holds them):
 *   itc_idx  HASH  instanceId -> "machineId|leaseAt|lastStamp"
 *   adder    STRING the highest machine id ever handed out
 *   revert   HASH  machineId -> lastStamp (released ids, with the time the next owner must not go below)
 *
 * Two clocks on purpose:
 * - `leaseAt` (renewal time, compared for recycling) comes from Redis `TIME`. Every claimant then compares
 *   against the same clock, so a host whose clock runs fast cannot recycle a live lease early. Our own stop
 *   rule is measured locally on a monotonic clock from *before* the successful request was sent, so it always
 *   fires at or before the store-side expiry (minus the margin), whatever the skew.
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

/** KEYS itc_idx, adder, revert; ARGV instanceId, maxMachineId, safeGuardMs, callerNow → {machineId, lastStamp} or {-1,-1}. */
export const distributeScript = defineScript(
  "idgen_machine_distribute",
  3,
  `${COMMON}
local instance = ARGV[1]
local maxId = tonumber(ARGV[2])
local safeGuard = tonumber(ARGV[3])
local callerNow = tonumber(ARGV[4])
local function hold(id, stamp)
  redis.call('HSET', KEYS[1], instance, id .. '|' .. now .. '|' .. math.max(stamp, callerNow))
  return {id, stamp}
end
-- 1. self: this instance already holds an id (restart with the same instance id)
local own = redis.call('HGET', KEYS[1], instance)
if own then
  local id, _, stamp = parse(own)
  return hold(id, stamp)
end
-- 2. a released id, lowest first
local pool = redis.call('HGETALL', KEYS[3])
local best, bestStamp
for i = 1, #pool, 2 do
  local id = tonumber(pool[i])
  if id <= maxId and (best == nil or id < best) then best = id; bestStamp = tonumber(pool[i + 1]) end
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
-- 4. recycle the stalest lease not renewed for the safe-guard duration (Redis clock). Its owner may have issued ids
--    until its stop rule fired, T - min(10 s, T/10) after its last renewal: the next owner must start after that.
local staleField, staleId, staleAt, staleStamp
for i = 1, #all, 2 do
  local id, leaseAt, stamp = parse(all[i + 1])
  if id <= maxId and leaseAt <= now - safeGuard and (staleAt == nil or leaseAt < staleAt) then
    staleField = all[i]; staleId = id; staleAt = leaseAt; staleStamp = stamp
  end
end
if staleField then
  redis.call('HDEL', KEYS[1], staleField)
  return hold(staleId, staleStamp + safeGuard - math.min(10000, math.floor(safeGuard / 10)))
end
return {-1, -1}
`,
);

/**
 * KEYS itc_idx, adder, revert; ARGV instanceId, machineId, callerNow → 1 renewed, 2 re-established, 0 lost.
 * Re-establish: our entry vanished (store restarted empty, key evicted or deleted) but nobody else holds the id
 * and nobody released it since; then it is still safely ours, so we write it back (distribute skips held ids
 * when it hands out new ones, so the adder need not move).
 * A live lease cannot have been recycled meanwhile: we stop generating `min(10 s, T/10)` before anyone may.
 */
export const guardScript = defineScript(
  "idgen_machine_guard",
  3,
  `${COMMON}
local id = tonumber(ARGV[2])
local own = redis.call('HGET', KEYS[1], ARGV[1])
if own then
  local held, _, stamp = parse(own)
  if held ~= id then return 0 end
  redis.call('HSET', KEYS[1], ARGV[1], id .. '|' .. now .. '|' .. math.max(stamp, tonumber(ARGV[3])))
  return 1
end
if redis.call('HEXISTS', KEYS[3], tostring(id)) == 1 then return 0 end
local all = redis.call('HGETALL', KEYS[1])
for i = 2, #all, 2 do
  local held = parse(all[i])
  if held == id then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], id .. '|' .. now .. '|' .. ARGV[3])
return 2
`,
);

/** KEYS itc_idx, revert; ARGV instanceId, machineId, callerNow → 1 released, 0 nothing of ours to release. */
export const revertScript = defineScript(
  "idgen_machine_revert",
  2,
  `${COMMON}
local own = redis.call('HGET', KEYS[1], ARGV[1])
if not own then return 0 end
local id, _, stamp = parse(own)
if id ~= tonumber(ARGV[2]) then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], id, math.max(stamp, tonumber(ARGV[3])))
return 1
`,
);
