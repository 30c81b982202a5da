import { Redis } from "ioredis";
import { readSse, redisServerPath, startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ns, ROOT_PASSWORD, startSecure, systemNs, type SecureProcess } from "./harness.js";

// A Redis restarted without persistence comes back empty: users, roles and the token key are gone. The processes on it
// must come back to a usable state by themselves — the super user there again, one token key every replica signs and
// checks with — without a restart of their own.
describe.skipIf(!redisServerPath())("security after Redis came back empty", () => {
  let redis: RedisServer;
  let owner: SecureProcess;
  let other: SecureProcess;
  beforeAll(async () => {
    redis = await startRedis();
    const system = systemNs();
    const target = { name: "redis", url: redis.url };
    owner = await startSecure(target, { GOV_NAMESPACE_SYSTEM: system });
    other = await startSecure(target, { GOV_NAMESPACE_SYSTEM: system });
  });
  afterAll(async () => {
    await Promise.all([owner?.close(), other?.close()]);
    await redis?.stop();
  });

  it("the super user is there again, and a token from one process works on the other", async () => {
    const dev = ns("dev");
    const before = (await owner.login("root", ROOT_PASSWORD)).accessToken;
    expect((await other.rest("PUT", `/v1/namespaces/${encodeURIComponent(dev)}/configs/a.yaml`, { token: before, body: "a: 1" })).status).toBe(200);

    await redis.stop();
    await redis.start(); // no persistence: empty

    const login = async (p: SecureProcess) => (await p.rest("POST", "/v1/authenticate/root/login", { body: { password: ROOT_PASSWORD } })).status;
    await expect.poll(() => login(owner), { timeout: 20_000, interval: 200 }).toBe(200);
    const after = (await owner.login("root", ROOT_PASSWORD)).accessToken;
    await expect.poll(async () => (await other.rest("PUT", `/v1/namespaces/${encodeURIComponent(dev)}/configs/b.yaml`, { token: after, body: "b: 1" })).status, { timeout: 20_000, interval: 200 }).toBe(200);
    // the key was stored again as it was: the session from before the loss is still good (root exists again)
    expect((await owner.rest("GET", `/v1/namespaces/${encodeURIComponent(dev)}/configs/b.yaml`, { token: before })).status).toBe(200);
  });

  it("the super user's open watch goes on across the loss: it gets the resync, not a claim that root no longer exists", async () => {
    const dev = ns("watched");
    const token = (await owner.login("root", ROOT_PASSWORD)).accessToken;
    expect((await owner.rest("PUT", `/v1/namespaces/${encodeURIComponent(dev)}/configs/w.yaml`, { token, body: "w: 1" })).status).toBe(200);
    const events: { data: { op?: string; code?: string; message?: string }; event: string }[] = [];
    const ac = new AbortController();
    try {
      const watch = await readSse(`${owner.url}/v1/namespaces/${encodeURIComponent(dev)}/configs/w.yaml/watch`, ac.signal, (data, event) => events.push({ data: data as never, event }), { authorization: `Bearer ${token}` });
      expect(watch.status).toBe(200);
      await expect.poll(() => events.length, { timeout: 5_000 }).toBe(1);

      await redis.stop();
      await redis.start(); // no persistence: empty, root included

      await expect.poll(() => events.length, { timeout: 20_000, interval: 100 }).toBeGreaterThan(1);
      expect(events[1]).toMatchObject({ event: "message", data: { op: "resync" } });
      expect(events.filter((e) => e.event === "error")).toEqual([]);
    } finally {
      ac.abort();
    }
  });

  it("emptied without a reconnect (FLUSHALL): within a check period root logs in again, and a process started after the flush agrees on the key", async () => {
    const dev = ns("flushed");
    const admin = new Redis(redis.url);
    try {
      await admin.flushall();
    } finally {
      admin.disconnect();
    }
    // it stores a token key of its own if it finds none; the others restore theirs within a check period (10 s)
    const late = await startSecure({ name: "redis", url: redis.url }, { GOV_NAMESPACE_SYSTEM: owner.system });
    try {
      const login = async (p: SecureProcess) => (await p.rest("POST", "/v1/authenticate/root/login", { body: { password: ROOT_PASSWORD } })).status;
      await expect.poll(() => login(owner), { timeout: 30_000, interval: 250 }).toBe(200);
      const fromLate = (await late.login("root", ROOT_PASSWORD)).accessToken;
      await expect.poll(async () => (await owner.rest("PUT", `/v1/namespaces/${encodeURIComponent(dev)}/configs/c.yaml`, { token: fromLate, body: "c: 1" })).status, { timeout: 30_000, interval: 250 }).toBe(200);
      const fromOwner = (await owner.login("root", ROOT_PASSWORD)).accessToken;
      expect((await late.rest("GET", `/v1/namespaces/${encodeURIComponent(dev)}/configs/c.yaml`, { token: fromOwner })).status).toBe(200);
    } finally {
      await late.close();
    }
  }, 90_000);
});
