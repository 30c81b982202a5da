import { Writable } from "node:stream";
import { connectRedis, quitQuietly } from "@gov/redis";
import { describe, expect, inject, it } from "vitest";
import { createLogger, toConnectError } from "../src/index.js";

/**
 * An unexpected store error is logged whole (a bug: its stack is wanted) — but ioredis puts the failed command on it,
 * arguments included: a config write's content (secrets, up to the content limit) ended up in the log line.
 */
describe.skipIf(inject("redisSkipReason"))("an unexpected Redis error in the log", () => {
  it("names the command but not its arguments", async () => {
    let lines = "";
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines += String(chunk);
        done();
      },
    });
    const logger = createLogger("redaction", "info", sink);
    const client = await connectRedis(inject("redisUrl"));
    try {
      const key = `redaction-{${process.pid}}`;
      await client.set(key, "a string, not a hash");
      const err = await client.eval("return redis.call('HGET', KEYS[1], 'f')", 1, key, "db-password=hunter2").then(
        () => new Error("the script succeeded"),
        (e: unknown) => e,
      );
      expect(String(err)).toMatch(/WRONGTYPE/);
      expect(toConnectError(err, logger).code).toBe(13); // internal: a bug, logged
      await new Promise((r) => setImmediate(r));
      expect(lines).toMatch(/WRONGTYPE/);
      expect(lines).toMatch(/"name":"eval"/);
      expect(lines).not.toMatch(/hunter2/);
    } finally {
      await quitQuietly(client);
    }
  });
});
