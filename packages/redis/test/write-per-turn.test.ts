import { startRedis, type RedisServer } from "@gov/testkit";
import type { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { connectRedis, createRedis, quitQuietly } from "../src/index.js";
import { MAX_HELD } from "../src/write-per-turn.js";

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

type Socket = Redis["stream"];

/** Counts what the sockets hand the kernel: each `_write` or `_writev` of a net.Socket is one write. */
function countWrites(sockets: Socket[]) {
  const counter = { count: 0, restore: () => {} };
  const restores = sockets.map((socket) => {
    const own = { write: socket._write, writev: socket._writev };
    socket._write = function (...args) {
      counter.count++;
      return own.write.apply(this, args);
    };
    socket._writev = function (...args) {
      counter.count++;
      return own.writev!.apply(this, args);
    };
    return () => Object.assign(socket, { _write: own.write, _writev: own.writev });
  });
  counter.restore = () => restores.forEach((r) => r());
  return counter;
}

/** The standalone client of createRedis: a turn's commands in one socket write, later turns' not held back. */
describe.skipIf(inject("redisSkipReason"))("a standalone client's writes, one per event-loop turn", () => {
  let redis: RedisServer;
  let client: Redis;
  beforeAll(async () => {
    redis = await startRedis(); // its own server: the test stops it
    client = (await connectRedis(redis.url)) as Redis;
  });
  afterAll(async () => {
    if (redis?.pid) process.kill(redis.pid, "SIGCONT"); // never leave a stopped process behind
    await quitQuietly(client);
    await redis?.stop();
  });

  it("the commands issued in one turn leave in one socket write per MAX_HELD of them", async () => {
    const writes = countWrites([client.stream]);
    try {
      const replies = Array.from({ length: MAX_HELD - 1 }, (_, i) => client.set(`{turn}:${i}`, String(i)));
      expect(await Promise.all(replies)).toEqual(Array(MAX_HELD - 1).fill("OK"));
      expect(writes.count).toBe(1);
      // a larger batch leaves in parts, the first ones while the rest are still being issued (Redis starts on them)
      const more = Array.from({ length: 50 }, (_, i) => client.set(`{turn}:${i}`, String(i)));
      expect(writes.count).toBe(1 + Math.floor(50 / MAX_HELD)); // written during the turn
      expect(await Promise.all(more)).toEqual(Array(50).fill("OK"));
      expect(writes.count).toBe(1 + Math.ceil(50 / MAX_HELD)); // and the rest at its end
    } finally {
      writes.restore();
    }
  });

  it("a command passes the client's habits once: one cork of its socket, one uncork at the turn's end", async () => {
    // createRedis once wrapped a standalone client twice: every command paid both wrappers, corked its socket twice
    // and scheduled two uncorks a turn
    const socket = client.stream;
    const reply = client.set("{turn}:once", "1");
    expect(socket.writableCorked).toBe(1);
    await nextTurn();
    expect(socket.writableCorked).toBe(0);
    expect(await reply).toBe("OK");
  });

  it("more than MAX_HELD commands issued while the connection is still coming up are queued and sent, not thrown", async () => {
    // no socket yet: nothing corked, and "undefined === undefined" once took the queue for a corked socket (TypeError)
    const fresh = createRedis(redis.url, { failFast: false });
    try {
      const replies = Array.from({ length: MAX_HELD * 2 }, (_, i) => fresh.set(`{turn}:early:${i}`, String(i)));
      expect(await Promise.all(replies)).toEqual(Array(MAX_HELD * 2).fill("OK"));
    } finally {
      await quitQuietly(fresh);
    }
  });

  it("a later turn's commands are sent while an earlier turn's are still unanswered", async () => {
    const socket = client.stream;
    process.kill(redis.pid!, "SIGSTOP");
    let first: Promise<unknown>;
    let second: Promise<unknown>;
    try {
      first = client.set("{turn}:first", "1");
      await nextTurn();
      const sentFirst = socket.bytesWritten;
      second = client.set("{turn}:second", "2");
      await nextTurn();
      // ioredis' auto-pipelining held the second command back until the first one's reply came: Redis, stopped, sends none
      expect(socket.bytesWritten).toBeGreaterThan(sentFirst);
      expect(socket.writableLength).toBe(0); // handed to the kernel, not buffered here
    } finally {
      process.kill(redis.pid!, "SIGCONT");
    }
    expect(await Promise.all([first!, second!])).toEqual(["OK", "OK"]);
    expect(await client.mget("{turn}:first", "{turn}:second")).toEqual(["1", "2"]);
  });

  it("a command still in its turn's socket buffer when the connection drops is handled as one written and unanswered", async () => {
    const dropping = (await connectRedis(redis.url)) as Redis;
    try {
      const write = dropping.set("{turn}:dropped", "1");
      dropping.stream.destroy(); // in the same turn: the command has not left the corked socket
      // ioredis sends an unanswered command again once the connection is back (maxRetriesPerRequest: once)
      expect(await write).toBe("OK");
      expect(await client.get("{turn}:dropped")).toBe("1");
    } finally {
      dropping.disconnect();
    }
  });
});

describe.skipIf(inject("redisSkipReason"))("a Cluster client's writes, one per event-loop turn and node", () => {
  it("the commands issued in one turn for one node leave in one socket write (up to MAX_HELD of them)", async () => {
    const cluster = (await connectRedis(inject("redisClusterUrl"))) as Cluster;
    try {
      await cluster.set("{turn}:warm", "1"); // the slot's node connection is open and ready
      const writes = countWrites(cluster.nodes("master").flatMap((node) => (node.stream ? [node.stream] : [])));
      try {
        const replies = Array.from({ length: MAX_HELD }, (_, i) => cluster.set(`{turn}:${i}`, String(i)));
        expect(await Promise.all(replies)).toEqual(Array(MAX_HELD).fill("OK"));
        expect(writes.count).toBe(1); // each routed command in its own write before
      } finally {
        writes.restore();
      }
    } finally {
      await quitQuietly(cluster);
    }
  });
});
