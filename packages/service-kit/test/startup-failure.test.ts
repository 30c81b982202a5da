import { spawn } from "node:child_process";
import { createServer, type Server } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { connectRedis, quitQuietly, type RedisClient } from "@gov/redis";
import { startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "../../..");

/**
 * `npm start` whose listener cannot be had (a port in use) stops with "startup failed" — after giving back what it had
 * taken while it was built: its machine-id lease was held for its ttl (5 minutes), one machine id per failed start of a
 * process restarted in a loop, until the pool ran out.
 */
describe.skipIf(inject("redisSkipReason"))("a process that fails to start", () => {
  let redis: RedisServer;
  let client: RedisClient;
  let busy: Server;
  beforeAll(async () => {
    redis = await startRedis();
    client = await connectRedis(redis.url);
    busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    await new Promise((resolve) => busy?.close(resolve));
    await quitQuietly(client);
    await redis?.stop();
  });

  it("gives its machine id back before it exits (port in use)", async () => {
    const port = (busy.address() as { port: number }).port;
    const env = { ...process.env, REDIS_URL: redis.url, PORT: String(port), HOST: "127.0.0.1", GOV_GRPC_PORT: "0", MANAGEMENT_SERVER_PORT: "0", GOV_SECURITY_ENABLED: "false", GOV_LOG_LEVEL: "fatal" };
    const child = spawn(process.execPath, ["--conditions=@gov/source", "--import", "tsx", join(root, "apps/main.ts")], { cwd: root, env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect([code, stderr]).toEqual([1, expect.stringContaining(`startup failed: setting PORT (from environment variable PORT) is invalid: port ${port} is in use`)]);
    // it had leased a machine id (the id generator starts before the listeners): released, not left to expire
    expect(await client.hlen("idgen:{gov}:itc_idx")).toBe(0);
    expect(await client.hlen("idgen:{gov}:revert")).toBe(1);
  }, 60_000);
});
