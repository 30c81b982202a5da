import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRedisConfigStore } from "@gov/config-service";
import { connectRedis } from "@gov/redis";
import { pauseProcesses, resumeProcesses, startRedis, startRedisCluster, type RedisClusterServers, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createTestGateway, ns, seg, type TestGateway } from "./harness.js";

/**
 * Writes whose outcome is unknown. A paused Redis (SIGSTOP) keeps its connections open and queues what it is sent,
 * so a write times out on the client yet is applied once the server resumes (SIGCONT): the answer must say
 * "may or may not have been applied" and how to check, never "retry" as if nothing happened. A write that could not
 * be sent (server stopped) must say that nothing was written.
 * Private servers only: pausing the shared ones would stall every other suite.
 */
const COMMAND_TIMEOUT_MS = 500;
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** Bytes that arrived at the server side of `port` and were not read yet (Linux /proc/net/tcp, IPv4 loopback). */
function unreadBytesAt(port: number): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  return readFileSync("/proc/net/tcp", "utf8")
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f[1]?.endsWith(`:${hexPort}`) && f[3] === "01") // local port, state ESTABLISHED
    .reduce((sum, f) => sum + parseInt(f[4].split(":")[1], 16), 0); // tx_queue:rx_queue
}

function rest(gw: TestGateway, namespace: string, configId = "app.yaml") {
  const url = `/v1/namespaces/${seg(namespace)}/configs/${seg(configId)}`;
  return {
    put: (data: string) => gw.app.inject({ method: "PUT", url, payload: data, headers: { "content-type": "text/plain" } }),
    get: () => gw.app.inject({ method: "GET", url }),
    del: () => gw.app.inject({ method: "DELETE", url }),
    rollback: (v: number) => gw.app.inject({ method: "PUT", url: `${url}/to/${v}` }),
    connectSet: (data: string) =>
      gw.app.inject({
        method: "POST",
        url: "/gov.config.v1.ConfigService/SetConfig",
        payload: { namespace, configId, data },
        headers: { "content-type": "application/json" },
      }),
  };
}

/**
 * The PUT sent while Redis is paused answers 504 deadline_exceeded within the command timeout, and was applied.
 * Only that write is meant to time out: the test process itself can stall past `gw`'s 500 ms on CI's two loaded cores
 * (a read after the pause then answered 503 "Command timed out"). So the checks after go through `steady` (another
 * gateway on the same Redis, its client with the default timeout), and the write before, made through `gw` so that its
 * connection to the node of the namespace's slot is up before the pause, is an idempotent one polled until it answers.
 */
async function provesUnknownOutcomeOnPausedRedis(gw: TestGateway, steady: TestGateway, pids: () => number[]) {
  const n = ns("paused");
  const c = rest(gw, n);
  const check = rest(steady, n);
  await expect.poll(async () => (await c.put("v1")).statusCode, { timeout: 5000, interval: 50 }).toBe(200);
  expect((await check.get()).json()).toMatchObject({ data: "v1", version: 1 });

  const unpause = pauseProcesses(pids());
  let r: Awaited<ReturnType<typeof c.put>>;
  let elapsed: number;
  try {
    const started = Date.now();
    r = await c.put("v2 sent while paused");
    elapsed = Date.now() - started;
  } finally {
    unpause();
  }
  expect(r.statusCode).toBe(504);
  const body = r.json();
  expect(body.code).toBe("deadline_exceeded");
  expect(body.message).toMatch(/may or may not have been applied/);
  expect(body.message).toContain(`GET /v1/namespaces/${seg(n)}/configs/app.yaml`);
  expect(body.message).toMatch(/compare its hash/);
  expect(body.message).not.toMatch(/retry when it is back/);
  expect(elapsed).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS - 50);
  expect(elapsed).toBeLessThan(COMMAND_TIMEOUT_MS + 2000);

  // Resumed, Redis runs what it had queued: the config now shows the write was applied, as the message said it might.
  await expect.poll(async () => (await check.get()).json().data, { timeout: 5000, interval: 50 }).toBe("v2 sent while paused");
  const cur = (await check.get()).json();
  expect(cur).toMatchObject({ version: 2, hash: sha("v2 sent while paused") });
  // ... and doing what the message advises is safe: the same content again changes nothing.
  expect((await check.put("v2 sent while paused")).json()).toBe(false);
}

describe.skipIf(inject("redisSkipReason"))("write outcomes on a paused or stopped Redis (standalone)", () => {
  let redis: RedisServer;
  let gw: TestGateway;
  let steady: TestGateway; // another gateway, its client with the default timeout: the writes before and checks after
  beforeAll(async () => {
    redis = await startRedis();
    const client = await connectRedis(redis.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS });
    gw = await createTestGateway(await createRedisConfigStore(client, { maxVersions: 100, kind: "redis" }));
    steady = await createTestGateway(await createRedisConfigStore(await connectRedis(redis.url), { maxVersions: 100, kind: "redis" }));
  });
  afterAll(async () => {
    if (redis?.pid) resumeProcesses([redis.pid]); // never leave a stopped process behind
    await gw?.close();
    await steady?.close();
    await redis?.stop();
  });

  it("a PUT that times out says its outcome is unknown and how to check; after SIGCONT the config shows it applied", async () => {
    await provesUnknownOutcomeOnPausedRedis(gw, steady, () => [redis.pid!]);
  });

  it("rollback, delete and Connect SetConfig on a paused Redis say the same, each with its own way to check", async () => {
    const n = ns("paused-ops");
    const c = rest(gw, n);
    const check = rest(steady, n);
    expect((await check.put("one")).json()).toBe(true);
    expect((await check.put("two")).json()).toBe(true);

    const unpause = pauseProcesses([redis.pid!]);
    let answers;
    try {
      answers = { rollback: await c.rollback(1), del: await c.del(), connect: await c.connectSet("three") };
    } finally {
      unpause();
    }
    expect(answers.rollback.statusCode).toBe(504);
    expect(answers.rollback.json()).toEqual({ code: "deadline_exceeded", message: expect.stringMatching(/may or may not have been applied.*\/versions/) });
    expect(answers.del.statusCode).toBe(504);
    expect(answers.del.json()).toEqual({ code: "deadline_exceeded", message: expect.stringMatching(/may or may not have been applied.*not_found means it was removed/) });
    expect(answers.connect.statusCode).toBe(504); // Connect's own mapping of deadline_exceeded
    expect(answers.connect.json()).toMatchObject({ code: "deadline_exceeded", message: expect.stringMatching(/may or may not have been applied/) });

    // All three were queued by the paused server and ran in order after SIGCONT: rollback (v3), delete, set (v4).
    await expect.poll(async () => (await check.get()).json().data, { timeout: 5000, interval: 50 }).toBe("three");
    expect((await check.get()).json().version).toBe(4);
  });

  it("a write in flight when the connection drops is reported as unknown too, not as 'nothing was written'", async () => {
    const n = ns("dropped");
    const c = rest(gw, n);
    expect((await rest(steady, n).put("before")).json()).toBe(true);
    const killed = redis.pid!;
    const unpause = pauseProcesses([killed]);
    const pending = c.put("sent, then the server died");
    try {
      // The write is on the wire (the paused server holds it unread) when the server dies and the connection resets.
      await expect.poll(() => unreadBytesAt(redis.port), { timeout: 5000, interval: 10 }).toBeGreaterThan(0);
      process.kill(killed, "SIGKILL");
    } finally {
      unpause();
    }
    const r = await pending;
    expect(r.statusCode).toBe(504);
    expect(r.json()).toEqual({ code: "deadline_exceeded", message: expect.stringMatching(/may or may not have been applied/) });
    await redis.stop(); // already dead: waits until its port is closed
    await redis.start();
    await expect.poll(async () => (await c.put("after the restart")).statusCode, { timeout: 10_000, interval: 100 }).toBe(200);
  });

  it("a write refused because Redis is stopped says nothing was written (503 unavailable)", async () => {
    const n = ns("stopped");
    const c = rest(gw, n);
    expect((await rest(steady, n).put("before")).json()).toBe(true);
    await redis.stop();
    try {
      for (const r of [await c.put("during"), await c.del(), await c.rollback(1), await c.connectSet("during")]) {
        expect(r.statusCode).toBe(503);
        expect(r.json()).toEqual({ code: "unavailable", message: expect.stringMatching(/is unavailable \(.+\): nothing was written; retry when it is back$/) });
      }
    } finally {
      await redis.start();
    }
  });
});

describe.skipIf(inject("redisSkipReason"))("write outcomes on a paused Redis Cluster", () => {
  let cluster: RedisClusterServers;
  let gw: TestGateway;
  let steady: TestGateway;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    const client = await connectRedis(cluster.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS });
    gw = await createTestGateway(await createRedisConfigStore(client, { maxVersions: 100, kind: "redis-cluster" }));
    steady = await createTestGateway(await createRedisConfigStore(await connectRedis(cluster.url), { maxVersions: 100, kind: "redis-cluster" }));
  });
  afterAll(async () => {
    resumeProcesses(cluster?.pids ?? []);
    await gw?.close();
    await steady?.close();
    await cluster?.stop();
  });

  it("a PUT that times out on a paused Cluster says its outcome is unknown; after SIGCONT the config shows it applied", async () => {
    // Every node is paused (for far less than cluster-node-timeout, so no node is marked failed): whichever one
    // owns the namespace's slot, the write reaches it and gets no answer.
    await provesUnknownOutcomeOnPausedRedis(gw, steady, () => cluster.pids);
  });

  it("a write refused because the Cluster is stopped says nothing was written (503 unavailable)", async () => {
    const c = rest(gw, ns("stopped-cluster"));
    await cluster.stop(); // the last test of this suite: the servers stay down
    for (const r of [await c.put("during"), await c.del(), await c.connectSet("during")]) {
      expect(r.statusCode).toBe(503);
      expect(r.json()).toEqual({ code: "unavailable", message: expect.stringMatching(/nothing was written; retry when it is back$/) });
    }
  });
});
