// After a master failover, ioredis 6.0.0 could leave a Cluster pipeline's commands queued unsent on a healthy master's
// connection, and every later reply there went to the wrong command (see cluster-pipelines.ts). The state a failover
// leaves is made here directly, so the test does not depend on winning a race: the slot's owner is missing from the
// connection pool (its connection ended) and one master connection is not ready (connecting).
import { createServer, type Server } from "node:net";
import { redisTargets } from "@gov/testkit";
import type { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectRedis } from "../src/index.js";

const target = redisTargets().find((t) => t.name === "redis-cluster")!;
const KEYS = 40;
const key = (i: number) => `{pipeline-guard-${i}}:h`;

/** The parts of ioredis's Cluster the test sets up as a failover leaves them. */
interface ClusterInternals {
  slots: string[][];
  connectionPool: { findOrCreate(node: { host: string; port: number }, readOnly: boolean): { status: string; connect(): Promise<void>; on(e: string, f: () => void): void; disconnect(): void } };
}

describe.skipIf(target.skip)("Cluster pipelines after a failover (the ioredis guard)", () => {
  let client: Cluster;
  let silent: Server;
  let silentPort: number;
  beforeAll(async () => {
    client = (await connectRedis(target.url)) as Cluster;
    for (let i = 0; i < KEYS; i++) await client.hset(key(i), "f", `v${i}`);
    // a "master" that accepts connections and never answers: its connection stays short of ready
    silent = createServer((socket) => socket.on("data", () => {}));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    silentPort = (silent.address() as { port: number }).port;
  });
  afterAll(async () => {
    client?.disconnect();
    await new Promise((resolve) => silent?.close(resolve));
  });

  it("every reply reaches its own command: a pipeline caught mid-failover fails (or is retried) whole, and nothing else is answered wrongly", async () => {
    const internals = client as unknown as ClusterInternals;
    const slot = Number(await client.cluster("KEYSLOT", key(0)));
    const wrong: string[] = [];
    let refused = 0;
    const check = (what: string, got: unknown, expected: unknown) => {
      if (JSON.stringify(got) !== JSON.stringify(expected)) wrong.push(`${what}: ${JSON.stringify(got)}, not ${JSON.stringify(expected)}`);
    };
    for (let round = 0; round < 40; round++) {
      // as after a failover, before the slot table is refreshed (ioredis refreshes it, so each round sets it again; and
      // so does the client's periodic refresh, keepSlotsCurrent, which may end the stuck connection while it is being
      // set up: then it is set up again)
      let stuck: ReturnType<ClusterInternals["connectionPool"]["findOrCreate"]> | undefined;
      await expect
        .poll(() => {
          if (!stuck || stuck.status === "end") {
            internals.slots[slot] = ["127.0.0.1:1", ...internals.slots[slot].slice(1)];
            stuck = internals.connectionPool.findOrCreate({ host: "127.0.0.1", port: silentPort }, false);
            stuck.on("error", () => {});
            if (stuck.status === "wait") void stuck.connect().catch(() => {});
          }
          return stuck.status;
        })
        .toBe("connect");
      const calls: Promise<void>[] = [
        client
          .multi()
          .hget(key(0), "f")
          .hget(key(0), "f")
          .exec()
          .then(
            (r) => check(`MULTI on ${key(0)}`, r, [[null, "v0"], [null, "v0"]]),
            () => void refused++,
          ),
      ];
      await new Promise((resolve) => setTimeout(resolve, 20));
      for (let i = 1; i < KEYS; i++) calls.push(client.hget(key(i), "f").then((r) => check(`HGET ${key(i)}`, r, `v${i}`), () => void refused++));
      await Promise.all(calls);
      if (wrong.length > 0) break; // once replies go astray on a connection, they keep doing so: no need to go on
    }
    // Without the guard, 40 rounds left commands stranded on some master within a few rounds and hundreds of answers
    // went to the wrong command; the plain reads must all be right, and the pipelines right or refused.
    expect(wrong).toEqual([]);
    expect(refused).toBeLessThan(40 * KEYS);
  }, 60_000);
});
