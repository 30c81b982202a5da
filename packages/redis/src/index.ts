export { createRedis, connectRedis, parseRedisUrl, redactRedisUrl, type RedisClient, type RedisTarget, type ConnectOptions } from "./connect.js";
