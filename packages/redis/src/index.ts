export { createRedis, connectRedis, parseRedisUrl, type RedisClient, type RedisTarget, type ConnectOptions } from "./connect.js";
