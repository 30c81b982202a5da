export { createRedis, connectRedis, parseRedisUrl, redactRedisUrl, type RedisClient, type RedisTarget, type ConnectOptions } from "./connect.js";
export { StoreUnavailableError, WriteOutcomeUnknownError } from "./store-errors.js";
export { describeWriteFailure, writeMaySend, type FailedWrite } from "./write-outcome.js";
export { isConnectionError, redisCaller, redisDownReason, quitQuietly, type RedisCall } from "./outage.js";
export { createSubscriberHub, type SubscriberHub, type PatternHandlers, type PatternSubscription } from "./subscriber-hub.js";
export { defineScript, prepareScripts, runScript, callScript, type LuaScript } from "./scripts.js";
export { followChanges, type ChangeFeed, type ChangeFeedOptions } from "./change-feed.js";
export { createReadGuard, type ReadGuard } from "./read-guard.js";
export { durableWriterOf, requireReplicas, writeDurably, runDurableScript, type ReplicaPolicy } from "./durable-write.js";
