import { connectRedis } from "@gov/redis";
import { startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createRedisRegistryStore } from "../src/store/redis-registry-store.js";
import { createRegistryGateway, ns, registryClients, seg, type RegistryGateway } from "./harness.js";

/**
 * The set a watching client holds after applying `ops` ("op:detail" lines): `current` and `resync` replace it with their
 * list, `remove`, `deregister` and `expired` take one out, any other op (add, register, renew, metadata) puts one in.
 * `key` turns an event's detail into a member (an instance id into its host).
 */
function replay(ops: string[], key: (detail: string) => string = (d) => d): string[] {
  const held = new Set<string>();
  for (const op of ops) {
    const colon = op.indexOf(":");
    const [kind, detail] = [op.slice(0, colon), op.slice(colon + 1)];
    if (kind === "current" || kind === "resync") {
      held.clear();
      detail.split(",").filter(Boolean).forEach((m) => held.add(m));
    } else if (kind === "remove" || kind === "deregister" || kind === "expired") held.delete(key(detail));
    else held.add(key(detail));
  }
  return [...held].sort();
}

describe.skipIf(inject("redisSkipReason"))("registry with Redis stopped mid-test", () => {
  let redis: RedisServer;
  let gw: RegistryGateway;
  let urls: { url: string; grpcUrl: string };
  beforeAll(async () => {
    redis = await startRedis();
    gw = await createRegistryGateway(await createRedisRegistryStore(await connectRedis(redis.url), { kind: "redis" }));
    urls = await gw.listen();
  });
  afterAll(async () => {
    await gw?.close();
    await redis?.stop();
  });

  it("answers 503 unavailable while Redis is down, recovers by itself, and both watches get a resync with the state as it is now", async () => {
    const n = ns("outage");
    const base = `/v1/namespaces/${seg(n)}/services`;
    const inject = (method: string, url: string, body?: unknown) =>
      gw.proc.http.inject({ method: method as "GET", url, ...(body ? { payload: JSON.stringify(body), headers: { "content-type": "application/json" } } : {}) });
    const register = (host: string) => inject("PUT", `${base}/s/instances`, { schema: "http", host, port: 1 });
    expect((await register("before")).json()).toBe(true);

    const [{ client }] = registryClients(urls);
    const stop = new AbortController();
    const ops: string[] = [];
    const watch = (async () => {
      for await (const m of client.watchInstances({ namespace: n, serviceId: "s" }, { signal: stop.signal })) {
        ops.push(`${m.op}:${m.op === "current" || m.op === "resync" ? m.instances.map((i) => i.host).join(",") : m.instanceId}`);
      }
    })().catch(() => undefined);
    const serviceOps: string[] = [];
    const serviceWatch = (async () => {
      for await (const m of client.watchServices({ namespace: n }, { signal: stop.signal })) {
        serviceOps.push(`${m.op}:${m.op === "current" || m.op === "resync" ? m.serviceIds.join(",") : m.serviceId}`);
      }
    })().catch(() => undefined);
    await expect.poll(() => [ops, serviceOps], { timeout: 3000 }).toEqual([["current:before"], ["current:s"]]);

    await redis.stop();
    const id = seg("s@http#before#1");
    for (const r of [
      await register("during"),
      await inject("GET", base),
      await inject("GET", `${base}/s/instances`),
      await inject("GET", `${base}/stats`),
      await inject("GET", `${base}/s/lb`),
      await inject("PUT", `${base}/p`),
      await inject("DELETE", `${base}/s`),
      await inject("DELETE", `${base}/s/instances/${id}`),
      await inject("PUT", `${base}/s/instances/${id}/renew`),
      await inject("PUT", `${base}/s/instances/${id}/metadata`, {}),
    ]) {
      expect([r.statusCode, r.json()]).toEqual([503, { code: "unavailable", message: expect.stringMatching(/Redis .*is unavailable/i) }]);
    }

    await redis.start(); // an empty server on the same port
    await expect.poll(async () => (await register("after")).statusCode, { timeout: 10_000, interval: 200 }).toBe(200);
    const r = await inject("GET", `${base}/s/instances`);
    expect(r.json().map((i: { host: string }) => i.host)).toEqual(["after"]);
    // The watch re-read once the feed was back: "before" is gone (the new server is empty), "after" is there.
    await expect.poll(() => ops.some((op) => op.startsWith("resync:")), { timeout: 10_000, interval: 50 }).toBe(true);
    await expect.poll(() => ops.at(-1), { timeout: 5000, interval: 50 }).toMatch(/^(resync:after|register:s@http#after#1)$/);
    // What a client that applies every message holds is the state as it is now: a resync that kept "before" would not do
    expect(replay(ops, (instanceId) => instanceId.split("#")[1])).toEqual(["after"]);
    // The service-list watch too: the new server has only what was written since ("after" re-created s).
    await expect.poll(() => serviceOps.some((op) => op.startsWith("resync:")), { timeout: 10_000, interval: 50 }).toBe(true);
    await client.putService({ namespace: n, serviceId: "later" });
    await expect.poll(() => serviceOps.at(-1), { timeout: 5000, interval: 50 }).toBe("add:later");
    expect(replay(serviceOps)).toEqual((await client.listServices({ namespace: n })).serviceIds);
    stop.abort();
    await Promise.all([watch, serviceWatch]);
  }, 60_000);
});
