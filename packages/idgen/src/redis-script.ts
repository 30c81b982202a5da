// Script registration and EVALSHA-with-fallback live in @gov/redis, shared with every store; kept so idgen's imports stay short.
export { defineScript, runDurableScript, runScript, UnderReplicatedWriteError, type LuaScript, type RedisClient } from "@gov/redis";
