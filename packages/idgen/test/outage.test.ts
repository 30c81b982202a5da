import { connectRedis, type RedisClient } from "@gov/redis";
import { Redis } from "ioredis";
import { startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  MachineIdLostException,
  MachineLease,
  redisMachineIdDistributor,
  redisSegmentDistributor,
  SegmentChainId,
  SegmentExhaustedError,
  SnowflakeId,
  CompositeIdGenerator,
} from "../src/index.js";
import { captureLogs, uniqueNamespace, waitUntil } from "./helpers.js";

/**
 * One Redis we can stop and restart (restart = empty data set). T = 4 s, so generators must stop
 * 3.6 s after the last successful renewal, and before anyone may recycle the id (T).
 */
describe.skipIf(inject("redisSkipReason"))("Redis outage", () => {
  let server: RedisServer;
  let client: RedisClient;
  beforeAll(async () => {
    server = await startRedis();
    client = await connectRedis(server.url, { redis: { retryStrategy: () => 50 } });
    client.on("error", () => {}); // connection errors while the server is down are expected here
  });
  afterAll(async () => {
    client?.disconnect();
    await server?.stop();
  });

  it("Guard Failed while down, next renewal succeeds once restored, stop at T − T/10, segment chain serves reserved ids then fails clearly", async () => {
    const ns = uniqueNamespace("outage");
    const logs = captureLogs();
    const lease = await MachineLease.acquire({
      namespace: ns,
      instanceId: "host:1",
      machineBit: 10,
      distributor: redisMachineIdDistributor(client),
      initialDelayMs: 100,
      delayMs: 100,
      retryDelayMs: 100,
      safeGuardMs: 4_000,
      logger: logs.logger,
    });
    const snowflake = new SnowflakeId({ machine: lease, logger: logs.logger });
    const composite = new CompositeIdGenerator({ machine: lease, logger: logs.logger });
    const chain = await SegmentChainId.create({
      distributor: redisSegmentDistributor(client, { namespace: ns, name: "order" }),
      step: 100,
      safeDistance: 5,
      prefetchPeriodMs: 50,
      logger: logs.logger,
    });
    snowflake.nextId();
    await waitUntil("a renewal", () => lease.state().renewals.success >= 1);

    // 1. Redis stops: renewal fails, ERROR `Guard Failed`, state records error + time, generation goes on
    await server.stop();
    await waitUntil("a failed renewal", () => lease.state().status === "DOWN");
    const down = lease.state();
    expect(down.lastError).toMatch(/\w+: .+/);
    expect(down.failedAt).toBeGreaterThan(Date.now() - 5_000);
    expect(logs.find("error", "Guard Failed").length).toBeGreaterThanOrEqual(1);
    expect(logs.find("error", "Guard Failed")[0]).toMatchObject({ error: expect.stringMatching(/\w+: .+/) });
    expect(JSON.stringify(logs.find("error", "Guard Failed")[0])).not.toMatch(/\n\s+at /); // no stack
    expect(() => snowflake.nextId()).not.toThrow();

    // 2. Redis back (empty), after a second failed renewal: the next renewal succeeds and the state clears
    await waitUntil("a second failed renewal", () => lease.state().consecutiveFailures >= 2);
    await server.start();
    await waitUntil("renewal after restore", () => lease.state().status === "UP", 3_000);
    expect(logs.find("info", "Renewed machine id again after failed renewals")).toHaveLength(1);
    // since the first failure of the run, not the last (each failure overwrote it)
    const again = logs.find("info", "Renewed machine id again after failed renewals")[0] as unknown as { failures: number; failedSince: number };
    expect(again.failures).toBeGreaterThanOrEqual(2);
    expect(again.failedSince).toBe(down.failedAt);
    expect(lease.state()).toMatchObject({ lastError: null, failedAt: null, lost: false });
    // the empty store reset the segment counter: the chain refuses to go backwards and keeps failing

    // 3. Redis down for longer than T − min(10 s, T/10) = 3.6 s
    await server.stop();
    const stoppedAt = Date.now();
    const runwayBefore = chain.runway;
    expect(runwayBefore).toBeGreaterThan(0);
    await waitUntil("the lease to be lost", () => {
      try {
        snowflake.nextId();
        return false;
      } catch (e) {
        return e instanceof MachineIdLostException;
      }
    }, 6_000);
    const lostAfter = Date.now() - stoppedAt;
    expect(lostAfter).toBeGreaterThan(3_000); // kept generating through the outage until near the deadline
    expect(lostAfter).toBeLessThan(4_000); // stopped before the id could be recycled by anyone
    expect(lease.state()).toMatchObject({ status: "LOST", lost: true });
    expect(() => snowflake.nextId()).toThrow(MachineIdLostException);
    expect(() => composite.nextIdAsString()).toThrow(MachineIdLostException);

    // the segment chain does not depend on the lease: it serves its reserved ids, then fails clearly
    const served: number[] = [];
    let failure: unknown;
    while (!failure) {
      // a caller taking ids steadily, yielding so the background prefetch runs (and fails)
      for (let i = 0; i < 20 && !failure; i++) {
        try {
          served.push(chain.nextId());
        } catch (e) {
          failure = e;
        }
      }
      await new Promise((r) => setTimeout(r, 3));
    }
    for (let i = 1; i < served.length; i++) expect(served[i]).toBe(served[i - 1] + 1);
    expect(served.length).toBe(runwayBefore);
    expect(failure).toBeInstanceOf(SegmentExhaustedError);
    expect((failure as Error).message).toMatch(/ran out of reserved ids and the store is failing/);
    await expect(chain.nextIdAsync()).rejects.toBeInstanceOf(SegmentExhaustedError);
    expect(logs.find("error", `AppendChain [${ns}.order] - prefetch failed`).length).toBeGreaterThanOrEqual(1);
    expect(logs.find("warn", "prefetch still failing").length).toBeGreaterThanOrEqual(1);

    // lost once, said once: a renewal still out when the deadline passed does not make it DOWN and lost again
    expect(logs.find("error", "Machine id lost; Snowflake generators stopped")).toHaveLength(1);
    expect(lease.state()).toMatchObject({ status: "LOST" });

    // 4. Restored again: a lost lease stays lost until it is re-distributed
    await server.start();
    await new Promise((r) => setTimeout(r, 300));
    await lease.renew();
    expect(() => snowflake.nextId()).toThrow(MachineIdLostException);
    await lease.redistribute();
    expect(lease.state().status).toBe("UP");
    await new Promise((r) => setTimeout(r, 2));
    expect(typeof snowflake.nextId()).toBe("bigint");

    // 5. Shutdown while Redis is down: ERROR `Revert machine id of [...] failed`, no throw
    chain.stop();
    await server.stop();
    await lease.revert();
    expect(logs.find("error", "Revert machine id of [host:1] failed")).toHaveLength(1);
    await server.start();
  });
});

describe.skipIf(inject("redisSkipReason"))("frozen Redis behind a client without a command timeout", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    if (server?.pid) process.kill(server.pid, "SIGCONT");
    await server?.stop();
  });

  /**
   * A lease (bounded by its own 300 ms) over a plain ioredis client: no commandTimeout, so a frozen server would make
   * any request wait forever. `use` runs with it; the client is closed after.
   */
  async function withUnboundedClient(name: string, use: (lease: MachineLease, logs: ReturnType<typeof captureLogs>) => Promise<void>): Promise<void> {
    const client = new Redis(server.url, { maxRetriesPerRequest: null });
    client.on("error", () => {});
    try {
      const logs = captureLogs();
      const lease = await MachineLease.acquire({
        namespace: uniqueNamespace(name),
        instanceId: `host:${name}`,
        machineBit: 4,
        distributor: redisMachineIdDistributor(client),
        autoRenew: false,
        requestTimeoutMs: 300,
        safeGuardMs: 60_000,
        logger: logs.logger,
      });
      await use(lease, logs);
    } finally {
      client.disconnect();
    }
  }

  it("the guard bounds its own renewal: Guard Failed within one attempt, UP again once Redis thaws", async () => {
    await withUnboundedClient("frozen", async (lease, logs) => {
      process.kill(server.pid!, "SIGSTOP"); // the server stops answering but keeps the connection open
      const started = performance.now();
      await lease.renew();
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(lease.state()).toMatchObject({ status: "DOWN", consecutiveFailures: 1 });
      expect(lease.state().lastError).toMatch(/^LeaseRequestTimeoutError: machine id renewal got no answer from the redis store within 300 ms/);
      expect(logs.find("error", "Guard Failed")).toHaveLength(1);
      process.kill(server.pid!, "SIGCONT");
      await lease.renew();
      expect(lease.state()).toMatchObject({ status: "UP", lastError: null });
      await lease.revert();
    });
  });

  it("the release at shutdown is bounded too: a frozen Redis logs Revert machine id of [...] failed within one attempt", async () => {
    await withUnboundedClient("frozen-revert", async (lease, logs) => {
      process.kill(server.pid!, "SIGSTOP");
      try {
        const started = performance.now();
        await lease.revert(); // a shutdown waits on this: without a bound it waited until the process gave up on it
        expect(performance.now() - started).toBeLessThan(2_000);
        expect(logs.find("error", "Revert machine id of [host:frozen-revert] failed")).toHaveLength(1);
        expect(logs.find("error", "Revert machine id of [host:frozen-revert] failed")[0].error).toMatch(/^LeaseRequestTimeoutError: machine id release got no answer/);
      } finally {
        process.kill(server.pid!, "SIGCONT");
      }
    });
  });
});
