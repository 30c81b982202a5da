import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
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

/**
 * The longest time this process's event loop went without a turn, from now until stop(): a stalled test process (CI's
 * two loaded cores stall it past 500 ms), which holds up every timer and every read in it — the registry's and the
 * clients' alike.
 */
function loopGaps(): { longest(): number; stop(): void } {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 20);
  return { longest: () => Math.max(longest, performance.now() - last), stop: () => clearInterval(timer) };
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
    const client = (options: { serviceId: string; namespace: string; ttlMs?: number; renewEveryMs?: number; keepalive?: boolean }) => {
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
      // 1.5 s, not 1 s: the registry renewing every third of it runs in this process, and its next tick is armed only
      // once a renewal's write is answered: a stall of the process there past 667 ms outlasts a 1 s ttl for real.
      const ttlMs = 1500;
      const gaps = loopGaps();
      const a = client({ serviceId: "order", namespace, ttlMs, keepalive: true });
      const registration = await a.c.register({ schema: "http", host: "10.0.0.1", port: 8080, metadata: { zone: "a" } });
      const registeredAt = Date.now();
      expect([registration.instanceId, registration.state]).toEqual(["order@http#10.0.0.1#8080", "registered"]);
      const b = client({ serviceId: "checkout", namespace });
      expect((await b.c.instances("order")).map((i) => [i.instanceId, i.metadata])).toEqual([["order@http#10.0.0.1#8080", { zone: "a" }]]);

      // The server renews about three times per TTL and answers each: wait for three TTLs and 8 renewals (of 9 due).
      await vi.waitFor(() => expect(Date.now() - registeredAt > 3 * ttlMs && a.count("renewed") >= 8).toBe(true), { timeout: 20_000, interval: 50 });
      expect(await listed(namespace, "order")).toEqual(["order@http#10.0.0.1#8080"]);
      expect((await b.c.instances("order")).map((i) => i.instanceId)).toEqual(["order@http#10.0.0.1#8080"]);
      // b's cache never lost it: every change event holds it (the first state, then its renewals: no expiry).
      const states = cachedStates(b.events);
      expect(states.length).toBeGreaterThanOrEqual(1);
      expect(states.every((ids) => ids.length === 1 && ids[0] === "order@http#10.0.0.1#8080")).toBe(true);
      expect(b.count("watch-failed")).toBe(0);
      // One stream all along: never failed, never opened again. The client reports "retrying" when no renewal came for
      // two of the registry's intervals; a stall of this process longer than one interval holds a renewal up in both
      // (the registry's tick and the client's read fire together after it), so those reports count only without one.
      gaps.stop();
      expect(a.count("re-registered")).toBe(0);
      const failed = a.events.flatMap((e) => (e.type === "renew-failed" ? [e.error.message] : []));
      expect(failed.filter((m) => !/has reported no renewal for 1000 ms/.test(m))).toEqual([]);
      if (gaps.longest() < ttlMs / 3) expect(failed).toEqual([]);
      // No timer in the client: not one unary call from a, one keepalive stream.
      expect(a.log.calls).toEqual([]);
      expect(a.h2Log.calls.map((c) => c.method)).toEqual(["Keepalive"]);

      await a.c.close();
      expect(await listed(namespace, "order")).toEqual([]); // deregistered, not left to expire one TTL later
      expect(registration.state).toBe("closed");
      expect(a.events.at(-1)).toEqual({ type: "deregistered", instanceId: "order@http#10.0.0.1#8080" });
      expect(a.log.calls.map((c) => c.method)).toEqual(["DeregisterInstance"]);
      await vi.waitFor(async () => expect(await b.c.instances("order")).toEqual([]), { timeout: 5000, interval: 10 });
    }, 30_000);

    it("a keepalive process that stalls itself past two renewal intervals does not report the registry's renewals missing", async () => {
      // The registry (here, not stalled) renews every 400 ms; the child blocks its loop 2 s, then reads what came meanwhile.
      const { child } = await spawnRegisteredChild({ REGISTRY_URL: url, REGISTRY_KEEPALIVE_URL: grpcUrl, REGISTRY_NAMESPACE: ns("kastall-"), REGISTRY_SERVICE: "worker", REGISTRY_TTL_MS: "1200", REGISTRY_STALL_MS: "2000" });
      children.push(child);
      const line = await new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once("line", resolve));
      // before: its overdue timer fired first after the stall and reported "no renewal for 800 ms" (renew-failed=1)
      expect(line).toMatch(/^after-stall renew-failed=0 renewed=[1-9]/);
    }, 20_000);

    it("a keepalive process killed with SIGKILL: another client's cache drops it one TTL later", async () => {
      const namespace = ns("kakill-");
      const ttlMs = 1500;
      const { child, instanceId } = await spawnRegisteredChild({ REGISTRY_URL: url, REGISTRY_KEEPALIVE_URL: grpcUrl, REGISTRY_NAMESPACE: namespace, REGISTRY_SERVICE: "worker", REGISTRY_TTL_MS: String(ttlMs) });
      children.push(child);
      expect(instanceId).toMatch(/^worker@http#127\.0\.0\.1#\d+$/);

      const b = client({ serviceId: "checkout", namespace });
      expect((await b.c.instances("worker")).map((i) => i.instanceId)).toEqual([instanceId]);
      const exited = new Promise((resolve) => child.once("exit", resolve));
      // Timed from before the kill: this process (the registry's too) learns of the exit and of the broken stream only
      // once it turns again, and a stall in between would have moved the start later than the server's last renewal.
      const killedAt = Date.now();
      child.kill("SIGKILL");
      await exited;
      await vi.waitFor(async () => expect(await b.c.instances("worker")).toEqual([]), { timeout: ttlMs * 4, interval: 10 });
      const gone = Date.now() - killedAt;
      // The server renews once when the stream breaks and the instance expires one TTL after that: not at once, and
      // not later than one TTL plus the time to notice the broken connection, with room for a stall of this process
      // (the registry's expiry and b's poll run in it).
      expect(gone).toBeGreaterThanOrEqual(0.9 * ttlMs);
      expect(gone).toBeLessThan(ttlMs + 2500);
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
      // Renewed every 333 ms as before, on a ttl of 1.5 s, not 1 s: the client's renewal timer (armed once a renewal is
      // answered) and the registry run in this process, and a stall of it past 667 ms there outlasts a 1 s ttl: the
      // instance expires between renewals and is registered again (RegisterInstance: not the steady state).
      const a = client({ serviceId: "order", namespace, ttlMs: 1500, renewEveryMs: 333 });
      await a.c.register({ schema: "http", host: "10.0.0.2", port: 80 });
      const b = client({ serviceId: "checkout", namespace });
      expect((await b.c.instances("order")).length).toBe(1);
      const before = await handledByServer(gateway);
      const renewedBefore = a.count("renewed");
      // Six renewals (two seconds) while b reads its cache constantly.
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
