import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ConfigService } from "@gov/api";
import { createConfigModule, createRedisConfigStore } from "@gov/config-service";
import { connectRedis } from "@gov/redis";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { restGateway } from "../src/index.js";
import { ns, seg, testSources } from "./harness.js";

/**
 * An outage is expected: the answers it causes (503 unavailable, 504 deadline_exceeded for a write whose outcome is
 * unknown) are logged at warn, without a stack — the first of an episode whole, on the REST gateway and on the RPC
 * listeners each, the rest counted and summed up when they stop; only bugs are errors with stacks.
 */
const COMMAND_TIMEOUT_MS = 500;

describe.skipIf(inject("redisSkipReason"))("outage answers in the log", () => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger("test", "info", { write: (line: string) => void lines.push(JSON.parse(line)) });
  let redis: RedisServer;
  let proc: BuiltProcess;
  let urls: { url: string; grpcUrl?: string };
  beforeAll(async () => {
    redis = await startRedis(); // a private server: pausing the shared one would stall every other suite
    const client = await connectRedis(redis.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS });
    const store = await createRedisConfigStore(client, { maxVersions: 10, kind: "redis" });
    proc = await buildProcess({ name: "test", modules: [createConfigModule({ store })], gateway: restGateway, sources: testSources(), logger });
    urls = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
  });
  afterAll(async () => {
    if (redis?.pid) process.kill(redis.pid, "SIGCONT"); // never leave a stopped process behind
    await proc?.shutdown();
    await redis?.stop();
  });
  beforeEach(() => void lines.splice(0));

  /** What was logged at warn or above, once every answer is in (the REST log line is written before the answer). */
  const problems = () => lines.filter((l) => (l.level as number) >= 40);
  const expectOneWarningWithoutStack = (code: string) => {
    const logged = problems();
    expect(logged, JSON.stringify(logged)).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 40, code });
    expect(logged[0]).not.toHaveProperty("err");
    expect(JSON.stringify(logged[0])).not.toMatch(/\n\s+at /); // no stack anywhere in the line
  };

  const clients = () => [
    { name: "Connect (HTTP/1.1)", client: createClient(ConfigService, createConnectTransport({ baseUrl: urls.url, httpVersion: "1.1" })) },
    { name: "gRPC (h2c)", client: createClient(ConfigService, createGrpcTransport({ baseUrl: urls.grpcUrl! })) },
  ];

  it("503 unavailable (Redis stopped): the first answer on REST and on the RPC listeners at warn, without a stack; the rest counted, and summed up once they stop", async () => {
    const n = ns("down");
    await redis.stop();
    try {
      for (let i = 0; i < 3; i++) {
        const rest = await fetch(`${urls.url}/v1/namespaces/${seg(n)}/configs/a.yaml`);
        expect(rest.status).toBe(503);
        await rest.text();
      }
      expectOneWarningWithoutStack("unavailable"); // three answers, one line
      expect(problems()[0]).toMatchObject({ method: "GET", path: `/v1/namespaces/${seg(n)}/configs/a.yaml`, outage: expect.stringContaining("further ones are counted") });

      const [connect, grpc] = clients();
      lines.splice(0);
      await expect(connect.client.getConfig({ namespace: n, configId: "a.yaml" }), connect.name).rejects.toMatchObject({ code: 14 });
      expectOneWarningWithoutStack("unavailable");
      expect(problems()[0]).toMatchObject({ rpc: "gov.config.v1.ConfigService/GetConfig" });
      lines.splice(0);
      await expect(grpc.client.getConfig({ namespace: n, configId: "a.yaml" }), grpc.name).rejects.toMatchObject({ code: 14 });
      expect(problems()).toEqual([]); // the same episode of the RPC listeners: counted
      // no answer for OUTAGE_QUIET_MS: each episode ends with its count, at info
      await expect
        .poll(() => lines.filter((l) => l.level === 30 && String(l.msg).startsWith("outage answers ended")).map((l) => l.answers), { timeout: 15_000, interval: 100 })
        .toEqual(expect.arrayContaining([3, 2]));
    } finally {
      await redis.start();
    }
  });

  it("504 deadline_exceeded (a write on a paused Redis): the first answer on REST and on the RPC listeners at warn, without a stack", async () => {
    const n = ns("paused");
    // Up again after the previous test: wait until the store answers.
    let timedOut = false;
    await expect
      .poll(
        async () => {
          const { status } = await fetch(`${urls.url}/v1/namespaces/${seg(n)}/configs/a.yaml`, { method: "PUT", body: "v0" });
          timedOut ||= status === 504;
          return status;
        },
        { timeout: 10_000, interval: 100 },
      )
      .toBe(200);
    // A write of that poll answered 504 (the test process stalled past the 500 ms command timeout, as on CI's two loaded
    // cores): that opened an episode of 504s of its own, in which the 504 below would only be counted. Wait until it ends.
    if (timedOut) {
      await expect
        .poll(() => lines.some((l) => l.level === 30 && l.code === "deadline_exceeded" && String(l.msg).startsWith("outage answers ended")), { timeout: 15_000, interval: 100 })
        .toBe(true);
    }
    lines.splice(0);
    const pid = redis.pid!;
    process.kill(pid, "SIGSTOP");
    try {
      const rest = await fetch(`${urls.url}/v1/namespaces/${seg(n)}/configs/a.yaml`, { method: "PUT", body: "v1" });
      expect(rest.status).toBe(504);
      await rest.text();
      expectOneWarningWithoutStack("deadline_exceeded");

      for (const [i, { name, client }] of clients().entries()) {
        lines.splice(0);
        await expect(client.setConfig({ namespace: n, configId: "a.yaml", data: `v${i + 2}` }), name).rejects.toMatchObject({ code: 4 });
        if (i > 0) {
          expect(problems()).toEqual([]); // gRPC after Connect: the same episode of the RPC listeners
          continue;
        }
        expectOneWarningWithoutStack("deadline_exceeded");
        expect(problems()[0]).toMatchObject({ rpc: "gov.config.v1.ConfigService/SetConfig", msg: expect.stringMatching(/may or may not have been applied/) });
      }
    } finally {
      process.kill(pid, "SIGCONT");
    }
  });
});
