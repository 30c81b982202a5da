import type { ChildProcess } from "node:child_process";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createRegistryGateway, ns, storeTargets, type RegistryGateway } from "../../../services/registry/test/harness.js";
import { createRegistryClient, type RegistryClient, type RegistryEvent } from "../src/index.js";
import { cachedStates, countingTransport, heldUntilExpired, spawnRegisteredChild } from "./support.js";
import { connectRedis } from "@gov/redis";
import { createRedisRegistryStore } from "@gov/registry-service";
import { pauseProcesses, redisServerPath, startRedis, type RedisServer } from "@gov/testkit";

/** Every RPC the registry process has handled so far, by method, from its own metrics (what the server saw). */
async function handledByServer(gateway: RegistryGateway): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const line of (await gateway.proc.metrics.scrape()).body.split("\n")) {
    const m = /^gov_rpc_requests_total\{.*method="([^"]+)".*\} (\d+)/.exec(line);
    if (m) counts.set(m[1], (counts.get(m[1]) ?? 0) + Number(m[2]));
  }
  return counts;
}

const grown = (before: Map<string, number>, after: Map<string, number>) =>
  Object.fromEntries([...after].filter(([method, n]) => n > (before.get(method) ?? 0)).map(([method, n]) => [method, n - (before.get(method) ?? 0)]));

for (const target of storeTargets()) {
  describe.skipIf(!!target.skip)(`registry client keepalive mode on the ${target.name} store`, () => {
    let gateway: RegistryGateway;
    let url: string;
    let grpcUrl: string;
    let remote: Client<typeof RegistryService>;
    const clients: RegistryClient[] = [];
    const children: ChildProcess[] = [];

    /** A client whose unary and keepalive calls are counted (on the real transports) and whose events are recorded. */
    const client = (options: { serviceId: string; namespace: string; ttlMs?: number; keepalive?: boolean }) => {
      const counted = countingTransport(createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
      const countedH2 = countingTransport(createConnectTransport({ baseUrl: grpcUrl, httpVersion: "2" }));
      const c = createRegistryClient({ transport: counted.transport, ...options, keepalive: options.keepalive ? { transport: countedH2.transport } : undefined });
      const events: RegistryEvent[] = [];
      c.on((e) => events.push(e));
      clients.push(c);
      return { c, log: counted.log, h2Log: countedH2.log, events, count: (type: RegistryEvent["type"]) => events.filter((e) => e.type === type).length };
    };
    const listed = async (namespace: string, serviceId: string) => (await remote.listInstances({ namespace, serviceId })).instances.map((i) => i.instanceId);

    beforeAll(async () => {
      gateway = await createRegistryGateway(await target.open());
      ({ url, grpcUrl } = await gateway.listen());
      remote = createClient(RegistryService, createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
    });
    afterEach(async () => {
      for (const child of children.splice(0)) child.kill("SIGKILL");
      await Promise.allSettled(clients.splice(0).map((c) => c.close()));
    });
    afterAll(() => gateway?.close());

    it("keeps the instance alive past several TTLs with the stream open and no renew calls; close() ends it and deregisters", async () => {
      const namespace = ns("ka-");
      const ttlMs = 1000;
      const a = client({ serviceId: "order", namespace, ttlMs, keepalive: true });
      const registration = await a.c.register({ schema: "http", host: "10.0.0.1", port: 8080, metadata: { zone: "a" } });
      const registeredAt = Date.now();
      expect([registration.instanceId, registration.state]).toEqual(["order@http#10.0.0.1#8080", "registered"]);
      const b = client({ serviceId: "checkout", namespace });
      expect((await b.c.instances("order")).map((i) => [i.instanceId, i.metadata])).toEqual([["order@http#10.0.0.1#8080", { zone: "a" }]]);

      // The server renews about three times per TTL and answers each: wait for 3.5 TTLs' worth of renewals.
      await vi.waitFor(() => expect(Date.now() - registeredAt > 3.5 * ttlMs && a.count("renewed") >= 9).toBe(true), { timeout: 15_000, interval: 50 });
      expect(await listed(namespace, "order")).toEqual(["order@http#10.0.0.1#8080"]);
      expect((await b.c.instances("order")).map((i) => i.instanceId)).toEqual(["order@http#10.0.0.1#8080"]);
      // b's cache never lost it: every change event holds it (the first state, then its renewals: no expiry).
      const states = cachedStates(b.events);
      expect(states.length).toBeGreaterThanOrEqual(1);
      expect(states.every((ids) => ids.length === 1 && ids[0] === "order@http#10.0.0.1#8080")).toBe(true);
      expect(b.count("watch-failed")).toBe(0);
      expect(a.count("renew-failed")).toBe(0);
      // No timer in the client: not one unary call from a, one keepalive stream.
      expect(a.log.calls).toEqual([]);
      expect(a.h2Log.calls.map((c) => c.method)).toEqual(["Keepalive"]);

      await a.c.close();
      expect(await listed(namespace, "order")).toEqual([]); // deregistered, not left to expire one TTL later
      expect(registration.state).toBe("closed");
      expect(a.events.at(-1)).toEqual({ type: "deregistered", instanceId: "order@http#10.0.0.1#8080" });
      expect(a.log.calls.map((c) => c.method)).toEqual(["DeregisterInstance"]);
      await vi.waitFor(async () => expect(await b.c.instances("order")).toEqual([]), { timeout: 2000, interval: 10 });
    }, 30_000);

    it("a keepalive process killed with SIGKILL: another client's cache drops it one TTL later", async () => {
      const namespace = ns("kakill-");
      const ttlMs = 1500;
      const { child, instanceId } = await spawnRegisteredChild({ REGISTRY_URL: url, REGISTRY_KEEPALIVE_URL: grpcUrl, REGISTRY_NAMESPACE: namespace, REGISTRY_SERVICE: "worker", REGISTRY_TTL_MS: String(ttlMs) });
      children.push(child);
      expect(instanceId).toMatch(/^worker@http#127\.0\.0\.1#\d+$/);

      const b = client({ serviceId: "checkout", namespace });
      expect((await b.c.instances("worker")).map((i) => i.instanceId)).toEqual([instanceId]);
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
      const killedAt = Date.now();
      await vi.waitFor(async () => expect(await b.c.instances("worker")).toEqual([]), { timeout: ttlMs * 4, interval: 10 });
      const gone = Date.now() - killedAt;
      // The server renews once when the stream breaks and the instance expires one TTL after that: not at once, and
      // not later than one TTL plus the time to notice the broken connection.
      expect(gone).toBeGreaterThanOrEqual(0.9 * ttlMs);
      expect(gone).toBeLessThan(ttlMs + 1000);
      expect(heldUntilExpired(b.events, instanceId)).toBe(true); // the cache learnt the expiry from the stream
      expect(b.log.calls.map((c) => c.method)).toEqual(["WatchInstances"]);
    }, 40_000);

    it("a keepalive transport over HTTP/1.1: register() rejects with the server's failed_precondition saying to use HTTP/2", async () => {
      const c = createRegistryClient({ baseUrl: url, keepalive: { transport: createConnectTransport({ baseUrl: url, httpVersion: "1.1" }) }, namespace: ns("h1-"), serviceId: "s" });
      clients.push(c);
      const refused = await c.register({ schema: "http", host: "h", port: 1 }).catch((e: unknown) => ConnectError.from(e));
      expect([(refused as ConnectError).code, (refused as ConnectError).rawMessage]).toEqual([Code.FailedPrecondition, expect.stringMatching(/needs HTTP\/2.*on the gRPC port/)]);
    });

    it("renew mode: in steady state the server handles renewals only, however often the cache is read", async () => {
      const namespace = ns("poll-");
      const ttlMs = 1000;
      const a = client({ serviceId: "order", namespace, ttlMs });
      await a.c.register({ schema: "http", host: "10.0.0.2", port: 80 });
      const b = client({ serviceId: "checkout", namespace });
      expect((await b.c.instances("order")).length).toBe(1);
      const before = await handledByServer(gateway);
      const renewedBefore = a.count("renewed");
      // Two TTLs' worth of renewals while b reads its cache constantly.
      let reads = 0;
      await vi.waitFor(
        async () => {
          for (let i = 0; i < 200; i++, reads++) await b.c.choose("order");
          expect(a.count("renewed") - renewedBefore).toBeGreaterThanOrEqual(6);
        },
        { timeout: 10_000, interval: 20 },
      );
      expect(reads).toBeGreaterThanOrEqual(200);
      const handled = grown(before, await handledByServer(gateway));
      expect(Object.keys(handled)).toEqual(["RenewInstance"]);
      expect(handled.RenewInstance).toBe(a.count("renewed") - renewedBefore);
    }, 30_000);
  });
}

describe.skipIf(!redisServerPath())("registry client keepalive mode while the registry's store does not answer", () => {
  let redis: RedisServer;
  let gateway: RegistryGateway;
  let url: string;
  let grpcUrl: string;
  beforeAll(async () => {
    redis = await startRedis();
    gateway = await createRegistryGateway(await createRedisRegistryStore(await connectRedis(redis.url), { kind: "redis" }));
    ({ url, grpcUrl } = await gateway.listen());
  });
  afterAll(async () => {
    await gateway?.close();
    await redis?.stop();
  });

  it('its state is "retrying" while the registry reports no renewal (it keeps the stream open), then "registered" again', async () => {
    const events: RegistryEvent[] = [];
    const c = createRegistryClient({ baseUrl: url, namespace: ns("ka-outage-"), serviceId: "order", ttlMs: 1500, keepalive: { baseUrl: grpcUrl } });
    c.on((e) => events.push(e));
    try {
      const registration = await c.register({ schema: "http", host: "10.0.0.1", port: 8080 });
      expect(registration.state).toBe("registered");
      const resume = pauseProcesses([redis.pid!]);
      try {
        await vi.waitFor(() => expect(registration.state).toBe("retrying"), { timeout: 5_000, interval: 20 });
        const failed = events.find((e) => e.type === "renew-failed");
        expect(failed && "error" in failed && failed.error.message).toMatch(/the registry has reported no renewal for 1000 ms \(two of its intervals\)/);
      } finally {
        resume();
      }
      await vi.waitFor(() => expect(registration.state).toBe("registered"), { timeout: 10_000, interval: 20 });
    } finally {
      await c.close();
    }
  });
});
