import { connectRedis } from "@gov/redis";
import { pauseProcesses, resumeProcesses, startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createRedisRegistryStore } from "../src/store/redis-registry-store.js";
import { createRegistryGateway, ns, seg, type RegistryGateway } from "./harness.js";

/**
 * Registry writes whose outcome is unknown. A paused Redis (SIGSTOP) keeps its connections open and queues what it is
 * sent, so a write times out on the client yet is applied once the server resumes (SIGCONT): the answer must be 504
 * deadline_exceeded, say "may or may not have been applied" and how to check, never "retry" as if nothing happened.
 * A write refused because the server is stopped says that nothing was written (503). A private server: pausing the
 * shared one would stall every other suite.
 */
const COMMAND_TIMEOUT_MS = 500;

describe.skipIf(inject("redisSkipReason"))("registry write outcomes on a paused or stopped Redis (standalone)", () => {
  let redis: RedisServer;
  let gw: RegistryGateway;
  // Only the writes sent while Redis is paused are meant to time out: the test process itself can stall past `gw`'s
  // 500 ms on CI's two loaded cores. The writes before and the checks after go through another gateway on the same
  // Redis, its client with the default timeout (or are reads polled until they answer).
  let steady: RegistryGateway;
  beforeAll(async () => {
    redis = await startRedis();
    const client = await connectRedis(redis.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS });
    gw = await createRegistryGateway(await createRedisRegistryStore(client, { kind: "redis" }));
    steady = await createRegistryGateway(await createRedisRegistryStore(await connectRedis(redis.url), { kind: "redis" }));
  });
  afterAll(async () => {
    if (redis?.pid) resumeProcesses([redis.pid]); // never leave a stopped process behind
    await gw?.close();
    await steady?.close();
    await redis?.stop();
  });

  const injectInto = (into: () => RegistryGateway) => (method: string, url: string, body?: unknown) =>
    into().proc.http.inject({ method: method as "GET", url, ...(body ? { payload: JSON.stringify(body), headers: { "content-type": "application/json" } } : {}) });
  const inject = injectInto(() => gw);
  const check = injectInto(() => steady);
  const hosts = async (base: string, serviceId: string) => ((await check("GET", `${base}/${serviceId}/instances`)).json() as { host: string }[]).map((i) => i.host);

  it("every write sent to a paused Redis answers 504 with how to check; after SIGCONT the writes show applied, and repeating them is safe", async () => {
    const n = ns("paused");
    const base = `/v1/namespaces/${seg(n)}/services`;
    const kept = seg("s@http#kept#1");
    const gone = seg("s@http#gone#1");
    expect((await check("PUT", `${base}/s/instances`, { schema: "http", host: "kept", port: 1 })).statusCode).toBe(200);
    expect((await check("PUT", `${base}/s/instances`, { schema: "http", host: "gone", port: 1 })).statusCode).toBe(200);
    expect((await check("PUT", `${base}/old`)).statusCode).toBe(200);

    const unpause = pauseProcesses([redis.pid!]);
    let answers: Record<string, Awaited<ReturnType<typeof inject>>>;
    const started = Date.now();
    try {
      answers = {
        register: await inject("PUT", `${base}/s/instances`, { schema: "http", host: "new", port: 1 }),
        renew: await inject("PUT", `${base}/s/instances/${kept}/renew`),
        metadata: await inject("PUT", `${base}/s/instances/${kept}/metadata`, { zone: "b" }),
        deregister: await inject("DELETE", `${base}/s/instances/${gone}`),
        putService: await inject("PUT", `${base}/added`),
        deleteService: await inject("DELETE", `${base}/old`),
      };
    } finally {
      unpause();
    }
    // Six writes, each waiting out the command timeout, not longer.
    expect(Date.now() - started).toBeLessThan(6 * COMMAND_TIMEOUT_MS + 3000);
    const expected: Record<string, RegExp> = {
      register: /registration of instance "s@http#new#1".*may or may not have been applied.*GET \/v1\/namespaces\/.*\/services\/s\/instances.*registering again is safe/,
      renew: /renewal of instance "s@http#kept#1".*may or may not have been applied.*ttlAt.*renewing again is safe/,
      metadata: /metadata change of instance "s@http#kept#1".*may or may not have been applied.*same metadata again is safe/,
      deregister: /deregistration of instance "s@http#gone#1".*may or may not have been applied.*deregistering again is safe/,
      putService: /creation of service "added".*may or may not have been applied.*ListServices.*PUT is safe/,
      deleteService: /deletion of service "old".*may or may not have been applied.*ListServices.*DELETE is safe/,
    };
    for (const [op, r] of Object.entries(answers)) {
      expect([op, r.statusCode, r.json()]).toEqual([op, 504, { code: "deadline_exceeded", message: expect.stringMatching(expected[op]) }]);
      expect(r.json().message, op).not.toMatch(/retry when it is back/);
    }

    // Resumed, Redis runs what it had queued: every write shows applied, as the messages said it might (the paused
    // gateway's own reads too: polled, they may time out on a stall of the test process).
    const hostsOf = (via: typeof inject) => async () => ((await via("GET", `${base}/s/instances`)).json() as { host: string }[]).map((i) => i.host);
    await expect.poll(hostsOf(inject), { timeout: 5000, interval: 50 }).toEqual(["kept", "new"]);
    await expect.poll(hostsOf(check), { timeout: 5000, interval: 50 }).toEqual(["kept", "new"]);
    const listed = (await check("GET", `${base}/s/instances`)).json() as { host: string; metadata: Record<string, string> }[];
    expect(listed.find((i) => i.host === "kept")?.metadata).toEqual({ zone: "b" });
    expect((await check("GET", base)).json()).toEqual(["added", "s"]);
    // ... and repeating them, as the messages advise, is safe.
    expect((await check("PUT", `${base}/s/instances`, { schema: "http", host: "new", port: 1 })).json()).toBe(true);
    expect((await check("PUT", `${base}/s/instances/${kept}/renew`)).json()).toBe(true);
    expect((await check("PUT", `${base}/added`)).json()).toBe(false);
    expect((await check("DELETE", `${base}/s/instances/${gone}`)).json()).toMatchObject({ code: "not_found" });
    expect(await hosts(base, "s")).toEqual(["kept", "new"]);
  }, 30_000);

  it("a write refused because Redis is stopped says nothing was written (503 unavailable)", async () => {
    const n = ns("stopped");
    const base = `/v1/namespaces/${seg(n)}/services`;
    const id = seg("s@http#a#1");
    expect((await check("PUT", `${base}/s/instances`, { schema: "http", host: "a", port: 1 })).statusCode).toBe(200);
    await redis.stop();
    try {
      for (const r of [
        await inject("PUT", `${base}/s/instances`, { schema: "http", host: "b", port: 1 }),
        await inject("PUT", `${base}/s/instances/${id}/renew`),
        await inject("PUT", `${base}/s/instances/${id}/metadata`, {}),
        await inject("DELETE", `${base}/s/instances/${id}`),
        await inject("PUT", `${base}/t`),
        await inject("DELETE", `${base}/s`),
      ]) {
        expect([r.statusCode, r.json()]).toEqual([503, { code: "unavailable", message: expect.stringMatching(/is unavailable \(.+\): nothing was written; retry when it is back$/) }]);
      }
    } finally {
      await redis.start();
    }
  }, 30_000);
});
