export { redisServerPath, startRedis, startRedisCluster, masterPortForKey, hashTagOn, promotedMasterPort, patternSubscriberPort, freePort, type RedisServer, type RedisClusterServers, type RedisClusterNode, type RedisClusterOptions } from "./redis-servers.js";
export { redisTargets, type RedisTargetName } from "./targets.js";
export { writeStream, type WriteStream, type AckedWrite } from "./write-stream.js";
export { readSse } from "./sse.js";
export { storeOutage, type StoreOutage } from "./outage.js";
export { pauseProcesses, resumeProcesses } from "./pause.js";
export { stallMonitor } from "./stall.js";
export { countingRequest, measureFanOut, type ByteCounter } from "./fan-out.js";
export { shuffledConfigIds } from "./config-ids.js";
