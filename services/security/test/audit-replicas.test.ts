import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { connectRedis, quitQuietly } from "@gov/redis";
import { startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { platform } from "../../../apps/platform.js";
import { ROOT_PASSWORD, systemNs } from "./harness.js";

/**
 * `gov.redis.min-replicas=1` with the replica gone quiet (as a shard is right after a failover, until the old master
 * comes back as a replica): every write waits the whole `gov.redis.replica-ack-timeout` and succeeds. A login's audit
 * entry is written whole before its answer, which waited at most 1 s for it: with a timeout of 1 s or more it never
 * made it, and every login answered 503 "the audit log could not record it" until a replica was back (found running
 * `npm run start:cluster` and killing the system shard's master).
 */
const ACK_TIMEOUT_MS = 1500;

describe.skipIf(inject("redisSkipReason"))("logins while the system namespace's shard has no replica (min-replicas 1)", () => {
  let master: RedisServer;
  let replica: RedisServer;
  let proc: BuiltProcess;
  let url: string;
  const login = async (password: string) => {
    const t = performance.now();
    const res = await fetch(`${url}/v1/authenticate/root/login`, { method: "POST", body: JSON.stringify({ password }), headers: { "content-type": "application/json" } });
    return { status: res.status, body: (await res.json()) as { accessToken?: string; message?: string }, ms: performance.now() - t };
  };

  beforeAll(async () => {
    master = await startRedis();
    replica = await startRedis({ args: ["--replicaof", "127.0.0.1", String(master.port)] });
    const replicaClient = await connectRedis(replica.url);
    try {
      await vi.waitFor(async () => expect(await replicaClient.info("replication")).toContain("master_link_status:up"), { timeout: 15_000, interval: 50 });
    } finally {
      await quitQuietly(replicaClient);
    }
    proc = await buildProcess({
      ...platform,
      logger: createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent"),
      sources: {
        file: {},
        env: {
          REDIS_URL: master.url,
          GOV_REDIS_MIN_REPLICAS: "1",
          GOV_REDIS_REPLICA_ACK_TIMEOUT: `${ACK_TIMEOUT_MS}ms`,
          GOV_SUPER_PASSWORD: ROOT_PASSWORD,
          GOV_NAMESPACE_SYSTEM: systemNs(),
          GOV_SHUTDOWN_GRACE: "2s",
        },
      },
    });
    url = (await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" })).url;
  }, 30_000);
  afterAll(async () => {
    if (replica?.pid) process.kill(replica.pid, "SIGCONT");
    await proc?.shutdown();
    await replica?.stop();
    await master?.stop();
  });

  it("a login succeeds after the replica wait, a wrong password is 401 and both are in the log (not 503)", async () => {
    const before = await login(ROOT_PASSWORD);
    expect([before.status, before.ms < ACK_TIMEOUT_MS]).toEqual([200, true]);
    process.kill(replica.pid!, "SIGSTOP");
    try {
      const ok = await login(ROOT_PASSWORD);
      expect([ok.status, ok.body.message]).toEqual([200, undefined]);
      expect(ok.ms).toBeGreaterThanOrEqual(ACK_TIMEOUT_MS - 10); // it did wait for the replica: the entry is written
      const wrong = await login("not-the-password");
      expect(wrong.status).toBe(401);
      const token = ok.body.accessToken!;
      const logins = async () =>
        ((await (await fetch(`${url}/v1/audit-log?query=${encodeURIComponent("/v1/authenticate/root/login")}&limit=10`, { headers: { authorization: `Bearer ${token}` } })).json()) as { list: { status: number }[] }).list.map(
          (e) => e.status,
        );
      expect(await logins()).toEqual([401, 200, 200]);
    } finally {
      process.kill(replica.pid!, "SIGCONT");
    }
  }, 30_000);
});
