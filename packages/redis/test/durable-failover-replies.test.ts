// Two replies a durable write meets around a failover, which were answered as internal errors (HTTP 500):
// NOSCRIPT (the node's script cache was emptied while this connection had already sent the script: nothing ran) and
// UNBLOCKED on the WAIT (the master was demoted with the write applied and its WAIT out: the outcome is unknown).
import type { RedisServer } from "@gov/testkit";
import { startReplicaPair, until, type ReplicaPair } from "./replica-pair.js";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { connectRedis, defineScript, describeWriteFailure, quitQuietly, redisCaller, requireReplicas, runDurableScript, writeMaySend, WriteOutcomeUnknownError, type RedisClient } from "../src/index.js";

const APPEND = defineScript("test-durable-append-failover", 1, "redis.call('RPUSH', KEYS[1], ARGV[1]) return redis.call('LLEN', KEYS[1])");

describe.skipIf(inject("redisSkipReason"))("durable writes: replies met around a failover", () => {
  let pair: ReplicaPair;
  let master: RedisServer;
  let replica: RedisServer;
  beforeAll(async () => {
    pair = await startReplicaPair();
    ({ master, replica } = pair);
  });
  afterAll(() => pair?.stop());

  it("a master that lost its scripts (NOSCRIPT): the write is sent again whole, and a WAIT follows it", async () => {
    const client = await connectRedis(master.url);
    const admin = await connectRedis(master.url);
    const closeWriter = await requireReplicas(client, { minReplicas: 1, timeoutMs: 1000 });
    const monitor = await ((await connectRedis(master.url)) as import("ioredis").Redis).monitor();
    const seen: string[] = [];
    monitor.on("monitor", (_time: string, args: string[]) => {
      if (["eval", "evalsha", "wait"].includes(String(args[0]).toLowerCase()) && (args[0] === "wait" || args.includes("{f}noscript"))) seen.push(String(args[0]).toLowerCase());
    });
    try {
      expect(await runDurableScript(client, APPEND, ["{f}noscript"], ["a"])).toBe(1);
      await admin.script("FLUSH"); // what a node that was resynced or restarted looks like to this connection
      seen.length = 0;
      const outcome = await redisCaller(client)(() => runDurableScript(client, APPEND, ["{f}noscript"], ["b"])).catch((err: Error) => err);
      expect(outcome).toBe(2);
      await until("the monitor to catch up", async () => seen.length >= 3, 2000).catch(() => {});
      // the write that ran is an EVAL, and a WAIT after it acknowledged it (the old code: EVALSHA, WAIT, then ioredis
      // sent the script again by itself behind the WAIT, and the write was acknowledged without any WAIT after it)
      const ran = seen.lastIndexOf("eval");
      expect(ran, seen.join(" ")).toBeGreaterThanOrEqual(0);
      expect(seen.slice(ran + 1), seen.join(" ")).toContain("wait");
      expect(await admin.lrange("{f}noscript", 0, -1)).toEqual(["a", "b"]);
    } finally {
      monitor.disconnect();
      await closeWriter();
      await quitQuietly(client);
      await quitQuietly(admin);
    }
  });

  it("a master demoted while the WAIT is out (UNBLOCKED): the write is reported as of unknown outcome", async () => {
    const client = await connectRedis(master.url);
    const admin = await connectRedis(master.url);
    const closeWriter = await requireReplicas(client, { minReplicas: 1, timeoutMs: 2000 });
    process.kill(replica.pid!, "SIGSTOP"); // the WAIT blocks
    try {
      const maySend = writeMaySend(client);
      const outcome = redisCaller(client)(() => runDurableScript(client, APPEND, ["{f}demoted"], ["x"])).then(
        () => "acknowledged",
        (err) => describeWriteFailure(err, maySend, { what: "the append", howToCheck: "read the list" }),
      );
      await until("the write to be applied on the master", async () => (await admin.llen("{f}demoted")) === 1, 1500);
      // a failover elsewhere demotes this master (CLUSTER FAILOVER TAKEOVER on its replica does the same): Redis
      // unblocks the WAIT with UNBLOCKED
      await admin.replicaof("127.0.0.1", String(replica.port));
      const failure = await outcome;
      expect(failure).toBeInstanceOf(WriteOutcomeUnknownError);
      expect((failure as Error).message).toMatch(/^the append was sent to Redis but got no answer .*UNBLOCKED.* read the list$/);
    } finally {
      process.kill(replica.pid!, "SIGCONT");
      await admin.replicaof("NO", "ONE").catch(() => {});
      await closeWriter();
      await quitQuietly(client);
      await quitQuietly(admin);
    }
  });
});
