import type { ChildProcess } from "node:child_process";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { chooseWeighted as serverChooseWeighted } from "@gov/registry-service";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createRegistryGateway, ns, storeTargets, type RegistryGateway } from "../../../services/registry/test/harness.js";
import { AlreadyRegisteredError, chooseWeighted, ClientClosedError, createRegistryClient, NoInstanceError, toNamespace, type RegistryClient, type RegistryEvent } from "../src/index.js";
import { ServiceCache } from "../src/discovery.js";
import { countingTransport, heldUntilExpired, spawnRegisteredChild } from "./support.js";

describe("toNamespace (seed namespace rule 3)", () => {
  it("wraps a plain name in braces and keeps a tagged one as given", () => {
    expect(["dev", "prod-eu", "{dev}", "cosky-{dev}", "team-{a}-x"].map(toNamespace)).toEqual(["{dev}", "{prod-eu}", "{dev}", "cosky-{dev}", "team-{a}-x"]);
  });
});

describe("chooseWeighted", () => {
  it("picks what the server's /lb rule picks for the same draw", () => {
    const items = [
      { instanceId: "a", weight: 1 },
      { instanceId: "b", weight: 0 },
      { instanceId: "c", weight: 3 },
      { instanceId: "d", weight: 2 },
    ];
    for (let i = 0; i < 1000; i++) {
      const draw = i / 1000;
      expect(chooseWeighted(items, () => draw)?.instanceId).toBe(serverChooseWeighted(items as never, () => draw)?.instanceId);
    }
    expect(chooseWeighted([{ weight: 0 }])).toBeUndefined();
  });
});

for (const target of storeTargets()) {
  describe.skipIf(!!target.skip)(`registry client on the ${target.name} store`, () => {
    let gateway: RegistryGateway;
    let url: string;
    let remote: Client<typeof RegistryService>;
    const clients: RegistryClient[] = [];
    const children: ChildProcess[] = [];

    /** A client whose calls are counted (on the real transport) and whose events are recorded. */
    const client = (options: { serviceId: string; namespace: string; ttlMs?: number; renewEveryMs?: number; firstRenewalLateMs?: number }) => {
      const real = createConnectTransport({ baseUrl: url, httpVersion: "1.1" });
      let late = options.firstRenewalLateMs;
      // the first renewal held back on its way (a slow network), so that it can reach the server after the ttl
      const delayed: Transport = {
        unary: async (method, ...rest) => {
          if (method.name === "RenewInstance" && late !== undefined) {
            const ms = late;
            late = undefined;
            await new Promise((r) => setTimeout(r, ms));
          }
          return real.unary(method, ...rest);
        },
        stream: (...args) => real.stream(...args),
      };
      const counted = countingTransport(delayed);
      const c = createRegistryClient({ transport: counted.transport, ...options });
      const events: RegistryEvent[] = [];
      c.on((e) => events.push(e));
      clients.push(c);
      return { c, log: counted.log, events, count: (type: RegistryEvent["type"]) => events.filter((e) => e.type === type).length };
    };
    const listed = async (namespace: string, serviceId: string) => (await remote.listInstances({ namespace, serviceId })).instances.map((i) => i.instanceId);

    beforeAll(async () => {
      gateway = await createRegistryGateway(await target.open());
      url = (await gateway.listen()).url;
      remote = createClient(RegistryService, createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
    });
    afterEach(async () => {
      for (const child of children.splice(0)) child.kill("SIGKILL");
      await Promise.allSettled(clients.splice(0).map((c) => c.close()));
    });
    afterAll(() => gateway?.close());

    it("registers, stays past its TTL by renewing, is discovered through the cache with no polling, and close() drops it promptly", async () => {
      const namespace = ns("sdk-");
      const a = client({ serviceId: "order", namespace, ttlMs: 1000 });
      const registration = await a.c.register({ schema: "http", host: "10.0.0.1", port: 8080, weight: 2, metadata: { zone: "a" } });
      expect([registration.instanceId, registration.state]).toEqual(["order@http#10.0.0.1#8080", "registered"]);
      const registeredAt = Date.now();

      const b = client({ serviceId: "checkout", namespace });
      expect(await b.c.instances("order")).toEqual([
        expect.objectContaining({ instanceId: "order@http#10.0.0.1#8080", host: "10.0.0.1", port: 8080, weight: 2, isEphemeral: true, metadata: { zone: "a" }, ttlAt: expect.any(Date) }),
      ]);

      // Twice the TTL later it is still there: only the renewals kept it.
      await vi.waitFor(() => expect(Date.now() - registeredAt > 2000 && a.count("renewed") >= 5).toBe(true), { timeout: 6000, interval: 50 });
      expect(await listed(namespace, "order")).toEqual(["order@http#10.0.0.1#8080"]);
      expect((await b.c.instances("order")).map((i) => i.instanceId)).toEqual(["order@http#10.0.0.1#8080"]);
      expect((await b.c.choose("order")).instanceId).toBe("order@http#10.0.0.1#8080");
      expect(a.count("renew-failed")).toBe(0);

      // Steady state: one watch stream, no list/choose calls whatever the number of reads; renewals only from a.
      expect(b.log.calls).toEqual([{ method: "WatchInstances", consumer: "checkout" }]);
      expect(a.log.count("RegisterInstance")).toBe(1);
      expect(a.log.calls.every((c) => c.method === "RegisterInstance" || c.method === "RenewInstance")).toBe(true);
      expect(a.log.calls.every((c) => c.consumer === null)).toBe(true); // the consumer header goes on discovery calls only

      await a.c.close();
      // Gone from the server the moment close() returns: deregistered, not left to expire (renewed a third of a TTL
      // ago at most, it would still be listed for two thirds of one).
      expect(await listed(namespace, "order")).toEqual([]);
      expect(registration.state).toBe("closed");
      expect(a.events.at(-1)).toEqual({ type: "deregistered", instanceId: "order@http#10.0.0.1#8080" });
      await vi.waitFor(async () => expect(await b.c.instances("order")).toEqual([]), { timeout: 2000, interval: 10 });
      await expect(a.c.instances("order")).rejects.toBeInstanceOf(ClientClosedError);
    });

    it("a watch of an instance renewed every third of its TTL (no renewal announced) stays open past the stall margin: no watch-failed, the ttlAt held never long past", { timeout: 20_000 }, async () => {
      const namespace = ns("sdk-quiet-");
      const a = client({ serviceId: "order", namespace, ttlMs: 1000 });
      await a.c.register({ schema: "http", host: "10.0.0.1", port: 8080 });
      const b = client({ serviceId: "checkout", namespace });
      await b.c.instances("order");
      // A renewal with two thirds of the ttl left is not announced; the watch sends it once the ttl b holds passes.
      // Before, b's cache kept the first ttlAt, and past it by the stall margin (5 s) gave the stream up as stalled.
      let stalest = 0;
      const until = Date.now() + 1000 + ServiceCache.STALL_MARGIN_MS + 1500;
      while (Date.now() < until) {
        const [held] = await b.c.instances("order");
        stalest = Math.max(stalest, Date.now() - held.ttlAt!.getTime());
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(b.count("watch-failed")).toBe(0);
      expect(b.log.calls).toEqual([{ method: "WatchInstances", consumer: "checkout" }]);
      expect(stalest).toBeLessThan(1000); // past by a re-read step at most (it was seconds)
      expect(a.count("renew-failed")).toBe(0);
    });

    it("registering an instance the client already keeps is refused before sending; once closed it may be registered again", async () => {
      const namespace = ns("sdk-dup-");
      const a = client({ serviceId: "dup", namespace, ttlMs: 1000 });
      const first = await a.c.register({ schema: "http", host: "h", port: 1 });
      const refused = await a.c.register({ schema: "http", host: "h", port: 1, metadata: { v: "2" } }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(AlreadyRegisteredError);
      expect((refused as AlreadyRegisteredError).instanceId).toBe("dup@http#h#1");
      expect(a.log.count("RegisterInstance")).toBe(1);
      // another port is another instance
      const other = await a.c.register({ schema: "http", host: "h", port: 2 });
      await first.close();
      // the instance stays gone: no second renewal loop brings it back (one did, re-registering on not_found)
      await new Promise((r) => setTimeout(r, 1500));
      expect(await listed(namespace, "dup")).toEqual(["dup@http#h#2"]);
      expect(a.count("re-registered")).toBe(0);
      const again = await a.c.register({ schema: "http", host: "h", port: 1 });
      expect(again.state).toBe("registered");
      expect(await listed(namespace, "dup")).toEqual(["dup@http#h#1", "dup@http#h#2"]);
      await other.close();
    });

    it("drops a killed process's instance from the cache within one TTL", async () => {
      const namespace = ns("kill-");
      const ttlMs = 1500;
      const { child, instanceId } = await spawnRegisteredChild({ REGISTRY_URL: url, REGISTRY_NAMESPACE: namespace, REGISTRY_SERVICE: "worker", REGISTRY_TTL_MS: String(ttlMs) });
      children.push(child);
      expect(instanceId).toMatch(/^worker@http#127\.0\.0\.1#\d+$/);

      const b = client({ serviceId: "checkout", namespace });
      expect((await b.c.instances("worker")).map((i) => i.instanceId)).toEqual([instanceId]);
      const killedAt = Date.now();
      child.kill("SIGKILL");
      await vi.waitFor(async () => expect(await b.c.instances("worker")).toEqual([]), { timeout: ttlMs * 3, interval: 10 });
      // The last renewal was at most a third of the TTL before the kill, so it expires within one TTL of it; the margin
      // is for delivering the expiry on a busy machine.
      expect(Date.now() - killedAt).toBeLessThan(ttlMs + 1000);
      expect(heldUntilExpired(b.events, instanceId)).toBe(true); // the cache learnt the expiry from the stream
      expect(b.log.calls.map((c) => c.method)).toEqual(["WatchInstances"]);
    });

    it("registers again at once when a renewal finds the instance expired", async () => {
      const namespace = ns("exp-");
      // A renewal that arrives after the TTL finds the instance expired.
      const a = client({ serviceId: "order", namespace, ttlMs: 1000, firstRenewalLateMs: 1500 });
      const { instanceId } = await a.c.register({ schema: "http", host: "10.0.0.2", port: 80 });
      await vi.waitFor(() => expect(a.count("re-registered")).toBeGreaterThanOrEqual(1), { timeout: 5000, interval: 20 });
      const failed = a.events.find((e) => e.type === "renew-failed");
      expect(failed).toMatchObject({ type: "renew-failed", instanceId, retryInMs: 0 });
      expect((failed as { error: ConnectError }).error.code).toBe(Code.NotFound);
      expect(await listed(namespace, "order")).toEqual([instanceId]);
    });

    it("never overlaps renewals, however short the interval", async () => {
      const namespace = ns("seq-");
      const a = client({ serviceId: "order", namespace, ttlMs: 1000, renewEveryMs: 1 });
      await a.c.register({ schema: "http", host: "10.0.0.4", port: 80 });
      await vi.waitFor(() => expect(a.count("renewed")).toBeGreaterThanOrEqual(30), { timeout: 5000, interval: 10 });
      expect(a.log.maxInFlight).toBe(1);
    });

    it("registers again when the instance was removed behind its back", async () => {
      const namespace = ns("gone-");
      const a = client({ serviceId: "order", namespace, ttlMs: 1000 });
      const b = client({ serviceId: "checkout", namespace });
      const { instanceId } = await a.c.register({ schema: "http", host: "10.0.0.3", port: 80 });
      expect((await b.c.instances("order")).length).toBe(1);
      await remote.deregisterInstance({ namespace, serviceId: "order", instanceId });
      await vi.waitFor(() => expect(a.count("re-registered")).toBe(1), { timeout: 3000, interval: 10 });
      await vi.waitFor(async () => expect((await b.c.instances("order")).map((i) => i.instanceId)).toEqual([instanceId]), { timeout: 2000, interval: 10 });
      expect(b.log.calls.map((c) => c.method)).toEqual(["WatchInstances"]);
    });

    it("chooses by weight from the cache, never weight 0, and a typed error when none can be chosen", async () => {
      const namespace = ns("lb-");
      for (const [port, weight] of [[1, 1], [2, 3], [3, 0]] as const) {
        await remote.registerInstance({ namespace, serviceId: "order", schema: "http", host: "10.0.1.1", port, weight, isEphemeral: false });
      }
      await remote.registerInstance({ namespace, serviceId: "idle", schema: "http", host: "10.0.1.1", port: 9, weight: 0, isEphemeral: false });
      const b = client({ serviceId: "checkout", namespace });
      const counts = new Map<number, number>();
      const N = 10_000;
      for (let i = 0; i < N; i++) {
        const port = (await b.c.choose("order")).port;
        counts.set(port, (counts.get(port) ?? 0) + 1);
      }
      expect(counts.get(3)).toBeUndefined();
      expect(Math.abs((counts.get(1) ?? 0) / N - 0.25)).toBeLessThan(0.02);
      expect(Math.abs((counts.get(2) ?? 0) / N - 0.75)).toBeLessThan(0.02);

      const none = await b.c.choose("idle").catch((e: unknown) => e);
      expect(none).toBeInstanceOf(NoInstanceError);
      expect(none).toMatchObject({ serviceId: "idle", namespace, message: expect.stringContaining("no live instance of weight above 0") });
      expect(await b.c.instances("unknown")).toEqual([]);
      await expect(b.c.choose("unknown")).rejects.toBeInstanceOf(NoInstanceError);
      expect(b.log.calls.map((c) => c.method)).toEqual(["WatchInstances", "WatchInstances", "WatchInstances"]); // one stream per service, nothing else
    });

    it("converts a plain namespace to {namespace} and passes server refusals through", async () => {
      const plain = `plain${process.pid}x${Date.now().toString(36)}`;
      const a = client({ serviceId: "order", namespace: plain });
      expect(a.c.namespace).toBe(`{${plain}}`);
      const { instanceId } = await a.c.register({ schema: "http", host: "10.0.2.1", port: 80 });
      expect(await listed(`{${plain}}`, "order")).toEqual([instanceId]);

      const refused = await a.c.register({ schema: "http", host: "10.0.2.1", port: 0 }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ConnectError);
      expect([(refused as ConnectError).code, (refused as ConnectError).rawMessage]).toEqual([Code.InvalidArgument, expect.stringContaining("port")]);

      // what protobuf cannot carry is refused by the client itself, as invalid_argument (not a serialization "internal")
      for (const opts of [{ port: 80.5 }, { port: 80, weight: 1.5 }, { port: 80, ttlMs: Number.NaN }]) {
        const e = await a.c.register({ schema: "http", host: "10.0.2.1", ...opts }).catch((err: unknown) => err);
        expect([JSON.stringify(opts), (e as ConnectError).code]).toEqual([JSON.stringify(opts), Code.InvalidArgument]);
      }

      const bad = client({ serviceId: "checkout", namespace: "{}x" });
      await expect(bad.c.instances("order")).rejects.toMatchObject({ code: Code.InvalidArgument });
    });
  });
}
