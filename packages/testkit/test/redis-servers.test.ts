import { Redis } from "ioredis";
import { createServer } from "node:net";
import { describe, expect, inject, it } from "vitest";
import { startRedis } from "../src/index.js";

const skip = inject("redisSkipReason");

describe.skipIf(skip)("test Redis servers", () => {
  it("the shared cluster serves keys from all three masters' slots", async () => {
    const { Cluster } = await import("ioredis");
    const nodes = inject("redisClusterUrl").replace("redis-cluster://", "").split(",").map((hp) => ({ host: hp.split(":")[0], port: Number(hp.split(":")[1]) }));
    const cluster = new Cluster(nodes);
    try {
      for (const k of ["a", "b", "c", "d", "e", "f"]) await cluster.set(`t:${k}`, k);
      expect(await cluster.get("t:e")).toBe("e");
      const masters = cluster.nodes("master");
      expect(masters).toHaveLength(3);
    } finally {
      cluster.disconnect();
    }
  });

  it("a private server stops by PID and starts again on the same port", async () => {
    const srv = await startRedis();
    const client = new Redis(srv.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => 50 });
    await new Promise((r) => client.once("ready", r));
    await client.set("k", "v");
    const pid = srv.pid;
    expect(pid).toBeGreaterThan(0);
    await srv.stop();
    expect(srv.pid).toBeUndefined();
    await expect(client.get("k")).rejects.toThrow();
    await srv.start();
    await expect.poll(() => client.status, { timeout: 5000 }).toBe("ready");
    expect(await client.get("k")).toBeNull(); // persistence is off: a restarted server is empty
    client.disconnect();
    await srv.stop();
  });

  it("a server killed by a signal reads as stopped: no pid, stop() resolves, start() brings it back", async () => {
    const srv = await startRedis();
    const pid = srv.pid!;
    process.kill(pid, "SIGKILL");
    // Killed by a signal, a child keeps exitCode null (its signalCode is set): it is stopped all the same.
    await expect.poll(() => srv.pid, { timeout: 5000 }).toBeUndefined();
    await srv.stop(); // no ESRCH for a process that is gone
    await srv.start();
    expect(srv.pid).toBeGreaterThan(0);
    await srv.stop();
    expect(srv.pid).toBeUndefined();
  });

  it("stop() right after an outside SIGKILL (before the exit is noticed) resolves too", async () => {
    const srv = await startRedis();
    process.kill(srv.pid!, "SIGKILL");
    await srv.stop();
    expect(srv.pid).toBeUndefined();
  });

  it("a server whose port is taken fails its start at once, saying so (it used to wait out 15 s for a dead process)", async () => {
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, "127.0.0.1", r));
    const port = (holder.address() as { port: number }).port;
    try {
      const started = Date.now();
      await expect(startRedis({ port })).rejects.toThrow(`redis-server on port ${port} exited at start`);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      holder.close();
    }
  });
});
