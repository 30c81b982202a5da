export { redisServerPath, startRedis, startRedisCluster, freePort, type RedisServer, type RedisClusterServers } from "./redis-servers.js";
export { redisTargets, type RedisTargetName } from "./targets.js";
