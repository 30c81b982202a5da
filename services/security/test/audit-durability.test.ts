import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { redisServerPath, startRedisCluster, type RedisClusterServers } from "@gov/testkit";
import { describe, expect, it } from "vitest";
import { NO_OUTCOME } from "../src/audit-log.js";
import { collectAudit } from "../src/store/security-store.js";
import { ns, openSecurityStoreOn, systemNs } from "./harness.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "../../..");
/** The cluster node (index into `ports`) serving `key`'s slot: the test cluster gives node i the i-th third of the slots. */
async function nodeOf(ports: number[], key: string): Promise<number> {
  const probe = new Redis({ port: ports[0], host: "127.0.0.1", lazyConnect: true });
  try {
    const slot = Number(await probe.call("CLUSTER", "KEYSLOT", key));
    return Math.min(ports.length - 1, Math.floor(slot / Math.floor(16384 / ports.length)));
  } finally {
    probe.disconnect();
  }
}

/**
 * "Never lose an entry the API acknowledged" (contract §7). The audit log's node of a private Redis Cluster is paused
 * (SIGSTOP) in the middle of a stream of audited config writes, which go to another node, and the process is SIGKILLed
 * during the pause. Batching entries after the answer would lose every entry queued behind the paused node while the
 * writes kept being answered; here no write is answered before its entry is stored, so every write answered has an
 * entry — with its outcome, or open (status 0) where the kill came before the outcome's batch — and a sweep files the
 * open ones into the log.
 */
describe.skipIf(!redisServerPath())("audit entries survive a SIGKILL of the process that answered", () => {
  it("every acknowledged write has its entry, even with the audit log's Redis node paused", async () => {
    const cluster = await startRedisCluster(3);
    try {
      await scenario(cluster);
    } finally {
      await cluster.stop();
    }
  }, 90_000);
});

async function scenario(cluster: RedisClusterServers) {
  const system = systemNs();
  const auditNode = await nodeOf(cluster.ports, `${system}:sec_audit`);
  let n = ns("durable");
  while ((await nodeOf(cluster.ports, n)) === auditNode) n = ns("durable");
  const env = {
    ...process.env,
    PORT: "0",
    GOV_GRPC_PORT: "0",
    MANAGEMENT_SERVER_PORT: "0",
    HOST: "127.0.0.1",
    GOV_CONFIG: "",
    REDIS_URL: cluster.url,
    GOV_NAMESPACE_SYSTEM: system,
    GOV_SUPER_PASSWORD: "durable-password",
  };
  const child = spawn(process.execPath, ["--import", "tsx", join(root, "apps/main.ts")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const acknowledged: string[] = [];
  try {
    await expect.poll(() => out, { timeout: 30_000, interval: 100 }).toMatch(/listening on http:\/\/\S+/);
    const url = /listening on (http:\/\/\S+)/.exec(out)![1];
    const login = await fetch(`${url}/v1/authenticate/root/login`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"password":"durable-password"}' });
    const authorization = `Bearer ${((await login.json()) as { accessToken: string }).accessToken}`;
    let next = 0;
    let killed = false;
    let paused: Promise<void> | undefined;
    // 16 writers until the process is gone. Once 200 writes were answered the audit node is paused; 300 ms later
    // (well inside the client's command timeout) the process is killed, then the node resumes.
    const pauseAndKill = async () => {
      process.kill(cluster.pids[auditNode], "SIGSTOP");
      try {
        await new Promise((r) => setTimeout(r, 300)); // the fault's length, not a wait for a condition
        killed = true;
        child.kill("SIGKILL");
        await exited;
      } finally {
        process.kill(cluster.pids[auditNode], "SIGCONT");
      }
    };
    const writer = async () => {
      while (!killed) {
        const id = `k${next++}`;
        try {
          const res = await fetch(`${url}/v1/namespaces/${encodeURIComponent(n)}/configs/${id}`, { method: "PUT", body: id, headers: { authorization } });
          if (res.status === 200 && !killed) acknowledged.push(id);
          if (acknowledged.length >= 200) paused ??= pauseAndKill();
        } catch {
          return; // the connection died with the process
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, writer));
    await paused;
  } finally {
    child.kill("SIGKILL");
    await exited;
  }
  expect(acknowledged.length).toBeGreaterThanOrEqual(200);

  const store = await openSecurityStoreOn(cluster.url, system, "redis-cluster");
  try {
    const entries = await collectAudit(store.scanAudit(Number.MAX_SAFE_INTEGER));
    const byId = new Map(entries.filter((e) => e.resource.startsWith(`/v1/namespaces/${n}/configs/`)).map((e) => [e.resource.split("/").pop()!, e]));
    const missing = acknowledged.filter((id) => !byId.has(id));
    expect(missing, `${missing.length} of ${acknowledged.length} acknowledged writes have no audit entry`).toEqual([]);
    for (const id of acknowledged) expect([0, 200]).toContain(byId.get(id)!.status);
    const open = [...byId.values()].filter((e) => e.status === 0);
    for (const e of open) expect(e.msg).toBe(NO_OUTCOME);
    // what the killed process left open is filed by a sweep (any process's), once
    expect(await store.sweepAudit(Date.now() + 1, 100_000)).toBeGreaterThanOrEqual(open.length);
    const after = await collectAudit(store.scanAudit(0)); // open entries no longer read: they are in the log now
    for (const e of open) expect(after.some((a) => a.id === e.id && a.status === 0)).toBe(true);
  } finally {
    await store.close();
  }
}
