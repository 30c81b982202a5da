import { hashTagOn, pauseProcesses, promotedMasterPort, resumeProcesses, startRedisCluster, type RedisClusterServers } from "@gov/testkit";
import type { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { connectRedis, quitQuietly, type RedisClient } from "../src/index.js";

/**
 * A Cluster master that freezes (SIGSTOP: its connections stay open, nothing is answered — an overloaded or stalled
 * host) is failed over by the Cluster to its replica. The client must find the new master by itself, although no
 * error it recognises (MOVED, a closed connection) ever arrives — only command timeouts — and a write that timed out
 * on the frozen master must never run later (ioredis sent it again to the new master, over newer acknowledged writes).
 */
describe.skipIf(inject("redisSkipReason"))("a Redis Cluster master that freezes and is failed over", () => {
  let cluster: RedisClusterServers;
  let client: RedisClient;
  beforeAll(async () => {
    cluster = await startRedisCluster(3, { replicas: 1 });
    client = await connectRedis(cluster.url, { commandTimeoutMs: 500 });
  }, 40_000);
  afterAll(async () => {
    if (cluster) resumeProcesses(cluster.pids); // never leave a stopped process behind
    if (client) await quitQuietly(client);
    await cluster?.stop();
  });

  /** How the frozen master ends: it wakes up (and rejoins as a replica), or it dies frozen. */
  const endings = [
    { ending: "wakes up", victim: 0 },
    { ending: "dies without waking", victim: 1 },
  ];
  it.each(endings)("a write that timed out is never run later, and the client finds the new master: the old master $ending", { timeout: 60_000 }, async ({ ending, victim: v }) => {
    const victim = cluster.masters[v];
    const witness = cluster.masters[2].port; // a node that stays up, asked where the key's slot lives
    const tag = await hashTagOn(victim.port, "frozen", witness);
    const key = `${tag}k`;
    // Appends, not SETs: a timed-out write run later shows in the list whenever it ran, before or after a newer one
    // (with SETs it showed only when it ran after, a race the test lost to ioredis' own refresh in some runs).
    const entries = (c: RedisClient) => c.lrange(key, 0, -1).catch((e: unknown) => (e as Error).message);
    // Only the write made while the master is frozen is meant to time out. Every other step goes through another
    // gateway's client (the default timeout), or is a read or an idempotent write polled until it answers: the test
    // process itself can stall past `client`'s 500 ms on CI's two loaded cores (a CI run failed on such a step).
    const other = await connectRedis(cluster.url);
    expect(await other.rpush(key, "A")).toBe(1);
    // "A" on the replica before the freeze: replication is asynchronous, and a replica promoted without it lost it (the
    // list then read ["C", "C"]: C pushed again by the poll below, whose first push answered 1). WAIT counts the writes
    // of its own connection, the one that pushed "A".
    const otherVictimConnection = (other as Cluster).nodes("master").find((n) => n.options.port === victim.port)!;
    expect(await otherVictimConnection.call("WAIT", "1", "5000")).toBe(1);
    // `client` reads "A": it is connected to the master about to freeze.
    await expect.poll(() => entries(client), { timeout: 10_000, interval: 100 }).toEqual(["A"]);
    // ioredis drops its connection to the old master once a slot refresh no longer lists it; that connection holds
    // the timed-out write, which ioredis' Cluster used to send again (its "connection closed" retry) to the new master.
    const victimConnection = (client as Cluster).nodes("all").find((n) => n.options.port === victim.port)!;
    const closed = new Promise<number>((resolve) => victimConnection.once("close", () => resolve(performance.now())));

    const resume = pauseProcesses([victim.pid]);
    try {
      const late = (await client.rpush(key, "B").catch((e: unknown) => e)) as Error;
      expect(late.message).toMatch(/timed out/); // its caller was told: outcome unknown
      const frozenAt = performance.now();
      await promotedMasterPort(witness, key, victim.port);
      const failedOverAt = performance.now();
      // Meanwhile a newer value is written and acknowledged through another gateway.
      await expect.poll(() => other.rpush(key, "C").catch((e: unknown) => (e as Error).message), { timeout: 15_000, interval: 100 }).toBe(2);

      // The first client finds the promoted replica by itself while the old master is still frozen (it used to keep
      // sending to the frozen one for as long as it stayed frozen), and the timed-out write stays unsent.
      await expect.poll(() => entries(client), { timeout: 15_000, interval: 100 }).toEqual(["A", "C"]);
      console.info(`failover ${Math.round(failedOverAt - frozenAt)} ms after the timed-out write; the client read the new master ${Math.round(performance.now() - failedOverAt)} ms after it`);
      // ioredis retries the commands of a closed connection 100 ms after it has failed them (before it emits "close"),
      // starting a slot refresh as it does: a refresh that ends later than that comes after the retry.
      const closedAt = await closed;
      while (((await new Promise((resolve) => client.once("refresh", () => resolve(performance.now())))) as number) < closedAt + 105);
      expect(await entries(other)).toEqual(["A", "C"]);
      if (ending === "dies without waking") process.kill(victim.pid, "SIGKILL");
    } finally {
      resume();
      await quitQuietly(other);
    }
    if (ending === "wakes up") {
      // It reads the timed-out write from its socket and learns it lost its slots: the write is not applied for good
      // there either. Wait until it has rejoined as a replica and caught up.
      const direct = await connectRedis(`redis://127.0.0.1:${victim.port}`);
      try {
        await direct.call("READONLY"); // a replica answers reads of its master's slots
        const rejoined = async () => /role:slave[\s\S]*master_link_status:up/.test(String(await direct.info("replication").catch(() => "")));
        await expect.poll(rejoined, { timeout: 20_000, interval: 100 }).toBe(true);
        await expect.poll(() => direct.call("LRANGE", key, 0, -1).catch(() => undefined), { timeout: 10_000, interval: 50 }).toEqual(["A", "C"]);
      } finally {
        await quitQuietly(direct);
      }
    }
    await expect.poll(() => entries(client), { timeout: 5_000, interval: 100 }).toEqual(["A", "C"]);
    // and it writes there (an idempotent write, polled: see above)
    await expect.poll(() => client.set(`${tag}w`, "D").catch((e: unknown) => (e as Error).message), { timeout: 5_000, interval: 100 }).toBe("OK");
  });
  it("a client that sends nothing while the master is frozen finds the new master too: its next command succeeds at once", { timeout: 60_000 }, async () => {
    const victim = cluster.masters[2]; // the two tests above failed masters 0 and 1 over; 0 is back, as a replica
    const witness = cluster.masters[0].port;
    const key = `${await hashTagOn(victim.port, "idle", witness)}k`;
    await expect.poll(() => client.set(key, "A").catch((e: unknown) => (e as Error).message), { timeout: 5_000, interval: 100 }).toBe("OK");
    const resume = pauseProcesses([victim.pid]);
    try {
      await promotedMasterPort(witness, key, victim.port);
      // No command timed out to prompt it: the client's own periodic refresh (two, so that one began after the
      // failover) has to find the promoted replica.
      for (let refreshes = 0; refreshes < 2; refreshes++) await new Promise((resolve) => client.once("refresh", resolve));
      // (a poll of at most a few tries, for a stalled test process: before the fix, every try went to the frozen master)
      await expect.poll(() => client.set(key, "B").catch((e: unknown) => (e as Error).message), { timeout: 1_500, interval: 100 }).toBe("OK");
    } finally {
      resume();
    }
    expect(await client.get(key)).toBe("B");
  });
});
