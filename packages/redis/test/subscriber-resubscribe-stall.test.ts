import { startRedis, type RedisServer } from "@gov/testkit";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { connectRedis, createSubscriberHub, quitQuietly } from "../src/index.js";

/**
 * A standalone Redis restarts, and the process stalls past the command timeout just as its hub's connection is back:
 * the PSUBSCRIBE sent then gets its reply late. The hub subscribes again itself and catches that failure; ioredis' own
 * re-subscribe (autoResubscribe) was nobody's promise, and its timeout an unhandled rejection.
 */
describe.skipIf(inject("redisSkipReason"))("a subscriber hub whose process stalls as its connection comes back", () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis(); // its own server: the test restarts it
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("leaves no unhandled rejection, and is live again", { timeout: 30_000 }, async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    const client = (await connectRedis(redis.url, { commandTimeoutMs: 300 })) as Redis;
    // the hub's connection is a duplicate of `client`: keep it, to stall on its "ready"
    const duplicate = client.duplicate.bind(client);
    let sub: Redis | undefined;
    client.duplicate = ((...args: Parameters<Redis["duplicate"]>) => (sub = duplicate(...args))) as Redis["duplicate"];
    const hub = createSubscriberHub(client);
    try {
      let lives = 0;
      await hub.subscribe("stall-resub:*", { message: () => {}, live: () => lives++, lost: () => {} }).firstLive;
      await redis.stop();
      await redis.start();
      // the stall: the main thread blocked for longer than the command timeout right after the connection is ready
      await new Promise<void>((resolve) =>
        sub!.once("ready", () => {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 600);
          resolve();
        }),
      );
      await expect.poll(() => lives, { timeout: 10_000, interval: 50 }).toBeGreaterThanOrEqual(2);
      await new Promise((r) => setTimeout(r, 500)); // a late rejection would have come by now (timeout 300 ms)
      expect(unhandled.map(String)).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
      await hub.close();
      await quitQuietly(client);
    }
  });
});
