import { startRedis, type RedisServer } from "@gov/testkit";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { connectRedis, quitQuietly, type RedisClient } from "../src/index.js";

/** What ioredis sends again when a dropped connection comes back: only what its callers still await. */
describe.skipIf(inject("redisSkipReason"))("commands a dropped connection left unanswered", () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis(); // its own server: the test stops and kills it
  });
  afterAll(async () => {
    if (redis?.pid) process.kill(redis.pid, "SIGCONT"); // never leave a stopped process behind
    await redis?.stop();
  });

  it("a write whose caller was answered (timed out) does not run once the connection is back", { timeout: 20_000 }, async () => {
    const client = (await connectRedis(redis.url, { commandTimeoutMs: 300 })) as Redis;
    let other: RedisClient | undefined;
    try {
      process.kill(redis.pid!, "SIGSTOP");
      const failure = (await client.set("{resend}:late", "old").catch((e: unknown) => e)) as Error;
      expect(failure.message).toMatch(/timed out/); // the caller's answer: outcome unknown
      // The server dies with the write unread and comes back empty: the write never ran there. Meanwhile the caller
      // (or another gateway's) may have written anew; ioredis used to send the old write on reconnecting, over it.
      process.kill(redis.pid!, "SIGKILL");
      await redis.stop();
      await redis.start();
      await expect.poll(() => client.status, { timeout: 10_000, interval: 20 }).toBe("ready");
      // Only the write sent while the server is stopped is meant to time out: the test process itself can stall past
      // `client`'s 300 ms on CI's two loaded cores. So the reads go through another client with the default timeout,
      // and `client`'s new write (idempotent) is polled until it answers.
      other = await connectRedis(redis.url);
      expect(await other.get("{resend}:late")).toBeNull();
      await expect.poll(() => client.set("{resend}:late", "new").catch((e: unknown) => (e as Error).message), { timeout: 5_000, interval: 100 }).toBe("OK");
      expect(await other.get("{resend}:late")).toBe("new");
    } finally {
      await quitQuietly(client);
      if (other) await quitQuietly(other);
    }
  });
});
