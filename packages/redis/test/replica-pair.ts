import { startRedis, type RedisServer } from "@gov/testkit";
import { connectRedis, quitQuietly, type RedisClient } from "../src/index.js";

/** Polls `check` until it holds (for hooks, where expect.poll is not allowed). */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const linkUp = async (replica: RedisClient) => (await replica.info("replication")).includes("master_link_status:up");

export interface ReplicaPair {
  master: RedisServer;
  replica: RedisServer;
  /** A client of the replica, to read what reached it. */
  replicaClient: RedisClient;
  /** Resumes the replica if a test paused it, and stops both. */
  stop(): Promise<void>;
}

/** A master and its replica on free ports, ready once the replica's link is up. */
export async function startReplicaPair(): Promise<ReplicaPair> {
  const master = await startRedis();
  const replica = await startRedis({ args: ["--replicaof", "127.0.0.1", String(master.port)] });
  const replicaClient = await connectRedis(replica.url);
  await until("the replica's link to its master", () => linkUp(replicaClient));
  return {
    master,
    replica,
    replicaClient,
    async stop() {
      if (replica.pid) process.kill(replica.pid, "SIGCONT");
      await quitQuietly(replicaClient);
      await replica.stop();
      await master.stop();
    },
  };
}
