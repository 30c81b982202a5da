import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import type { BuiltProcess } from "@gov/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatsStores } from "../src/worker/stores.js";
import { freshNamespace, seg, startStatsProcess, statsTargets, type TestNamespaces } from "./stats-harness.js";

const POLL = { timeout: 10_000, interval: 50 }; // many periods of the tests' 300 ms schedule, on a busy host

for (const target of statsTargets()) {
  describe.skipIf(target.skip)(`namespace stat on the ${target.name} store`, () => {
    let stores: StatsStores & TestNamespaces;
    let proc: BuiltProcess;
    let urls: { url: string; grpcUrl?: string };
    beforeAll(async () => {
      stores = await target.open();
      proc = await startStatsProcess(stores);
      urls = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
    });
    afterAll(async () => {
      await proc?.shutdown();
      await stores?.stats.close();
    });

    const req = async (method: string, url: string, body?: unknown) => {
      const res = await proc.http.inject({
        method: method as "GET",
        url,
        ...(body === undefined ? {} : typeof body === "string" ? { payload: body, headers: { "content-type": "text/plain" } } : { payload: JSON.stringify(body), headers: { "content-type": "application/json" } }),
      });
      return { status: res.statusCode, json: res.body ? (JSON.parse(res.body) as unknown) : undefined };
    };
    const register = (ns: string, serviceId: string, port: number, extra: Record<string, unknown> = {}) =>
      req("PUT", `/v1/namespaces/${seg(ns)}/services/${seg(serviceId)}/instances`, { schema: "http", host: "10.0.0.1", port, ...extra });
    const stat = async (ns: string) => (await req("GET", `/v1/namespaces/${seg(ns)}/stat`)).json;

    it("stat numbers match what was created within one period, over REST; service stats read the same counts", async () => {
      const ns = stores.add(freshNamespace());
      for (const id of ["a.yaml", "b.yaml"]) expect((await req("PUT", `/v1/namespaces/${seg(ns)}/configs/${id}`, "x: 1")).status).toBe(200);
      await register(ns, "order", 1);
      await register(ns, "order", 2, { isEphemeral: false });
      await register(ns, "pay", 1);
      expect((await req("PUT", `/v1/namespaces/${seg(ns)}/services/idle`)).json).toBe(true);
      // namespaces: this test's and the current context namespace, which every pass visits
      await expect.poll(() => stat(ns), POLL).toEqual({ namespaces: 2, services: { total: 3, health: 2 }, instances: 3, configs: 2 });
      expect((await req("GET", `/v1/namespaces/${seg(ns)}/services/stats`)).json).toEqual([
        { serviceId: "idle", instanceCount: 0 },
        { serviceId: "order", instanceCount: 2 },
        { serviceId: "pay", instanceCount: 1 },
      ]);
      // a namespace no pass counted answers zeros for its own counts, never 404; `namespaces` is the server's (the
      // index of this test's stores holds this test's namespace at least)
      const uncounted = (await stat(freshNamespace())) as { namespaces: number };
      expect(uncounted).toEqual({ namespaces: expect.any(Number), services: { total: 0, health: 0 }, instances: 0, configs: 0 });
      expect(uncounted.namespaces).toBeGreaterThanOrEqual(1);
    });

    it("expired instances stop counting and a service without a live instance is not healthy; the sweep removed them", async () => {
      const ns = stores.add(freshNamespace());
      await register(ns, "short", 1, { ttl: "1s" });
      await register(ns, "long", 1);
      await expect.poll(() => stat(ns), POLL).toMatchObject({ services: { total: 2, health: 2 }, instances: 2 });
      await expect.poll(() => stat(ns), POLL).toMatchObject({ services: { total: 2, health: 1 }, instances: 1 });
      expect((await req("GET", `/v1/namespaces/${seg(ns)}/services/stats`)).json).toEqual([
        { serviceId: "long", instanceCount: 1 },
        { serviceId: "short", instanceCount: 0 },
      ]);
      // swept, not merely hidden: even at an earlier time the record is gone from the store
      expect(await stores.registry.listInstances(ns, "short", 0)).toEqual([]);
    });

    it("a namespace that leaves the index (deleted) reads zeros again after the next pass", async () => {
      const ns = stores.add(freshNamespace());
      await register(ns, "svc", 1);
      await expect.poll(async () => ((await stat(ns)) as { instances: number }).instances, POLL).toBe(1);
      stores.remove(ns);
      await expect.poll(() => stat(ns), POLL).toEqual({ namespaces: expect.any(Number), services: { total: 0, health: 0 }, instances: 0, configs: 0 });
    });

    it("the same over Connect and gRPC", async () => {
      const ns = stores.add(freshNamespace());
      await register(ns, "svc", 1);
      for (const transport of [createConnectTransport({ baseUrl: urls.url, httpVersion: "1.1" }), createGrpcTransport({ baseUrl: urls.grpcUrl! })]) {
        const client = createClient(StatsService, transport);
        await expect.poll(async () => (await client.getStat({ namespace: ns })).instances, POLL).toBe(1);
        expect(await client.getStat({ namespace: ns })).toMatchObject({ services: { total: 1, health: 1 }, instances: 1, configs: 0 });
        const registry = createClient(RegistryService, transport);
        expect((await registry.getServiceStats({ namespace: ns })).stats.map((s) => [s.serviceId, s.instanceCount])).toEqual([["svc", 1]]);
      }
    });

    it("bad namespaces are refused with a message that says how to fix them", async () => {
      for (const path of ["/v1/namespaces/dev/stat", "/v1/namespaces/dev/stat/topology"]) {
        const res = await req("GET", path);
        expect(res.status).toBe(400);
        expect(res.json).toMatchObject({ code: "invalid_argument", message: expect.stringContaining("{dev}") });
      }
    });
  });
}
