import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { createRegistryClient } from "@gov/registry-client";
import { EDGE_WRITE_INTERVAL_MS, UNKNOWN_CONSUMER_RETRY_MS } from "@gov/registry-service";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import { CLOCK_SKEW_ALLOWANCE_MS, type BuiltProcess } from "@gov/service-kit";
import { stallMonitor } from "@gov/testkit";
import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatsStores } from "../src/worker/stores.js";
import { freshNamespace, seg, startStatsProcess, statsTargets, type TestNamespaces } from "./stats-harness.js";

const POLL = { timeout: 10_000, interval: 50 }; // many periods of the tests' 300 ms schedule, on a busy host
const EDGE_TTL_MS = 60_000;

for (const target of statsTargets()) {
  describe.skipIf(target.skip)(`topology on the ${target.name} store`, () => {
    let stores: StatsStores & TestNamespaces;
    let proc: BuiltProcess;
    let url: string;
    // The test clock of the registry, the stats reads and the worker: real time plus what the test skips ahead.
    let skipped = 0;
    const now = () => Date.now() + skipped;
    beforeAll(async () => {
      stores = await target.open();
      proc = await startStatsProcess(stores, { now, env: { GOV_TOPOLOGY_EDGE_TTL: `${EDGE_TTL_MS}ms` } });
      url = (await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" })).url;
    });
    afterAll(async () => {
      await proc?.shutdown();
      await stores?.stats.close();
    });

    const get = async (path: string, headers: Record<string, string> = {}) => {
      const res = await proc.http.inject({ method: "GET", url: path, headers });
      return { status: res.statusCode, json: JSON.parse(res.body) as unknown };
    };
    const put = (path: string, body?: unknown) =>
      proc.http.inject({ method: "PUT", url: path, ...(body ? { payload: JSON.stringify(body), headers: { "content-type": "application/json" } } : {}) });
    const services = (ns: string) => `/v1/namespaces/${seg(ns)}/services`;
    const topology = async (ns: string) => (await get(`/v1/namespaces/${seg(ns)}/stat/topology`)).json;
    /** A namespace with services A, B (one live instance), C. */
    const setUp = async () => {
      const ns = stores.add(freshNamespace());
      for (const id of ["A", "C"]) await put(`${services(ns)}/${id}`);
      await put(`${services(ns)}/B/instances`, { schema: "http", host: "b", port: 1 });
      return ns;
    };

    it("A discovering B with X-Gov-Consumer creates A → [B]; /lb too; browsing without it, self-discovery and unknown consumers record nothing", async () => {
      const ns = await setUp();
      expect((await get(`${services(ns)}/B/instances`)).status).toBe(200);
      expect((await get(`${services(ns)}/B/lb`)).status).toBe(200);
      expect((await get(`${services(ns)}/A/instances`, { "x-gov-consumer": "A" })).status).toBe(200); // self
      expect((await get(`${services(ns)}/B/instances`, { "x-gov-consumer": "ghost" })).status).toBe(200); // not a service of ns
      expect((await get(`${services(ns)}/B/instances`, { "x-gov-consumer": "bad\u0001id" })).status).toBe(200); // refused quietly
      // anonymous browsing left nothing behind (the header calls below are the only writes, and they land after these)
      expect(await stores.topology.edges(ns, 0)).toEqual([]);
      expect((await get(`${services(ns)}/B/instances`, { "x-gov-consumer": "A" })).status).toBe(200);
      expect((await get(`${services(ns)}/B/lb`, { "x-gov-consumer": "C" })).status).toBe(200);
      await expect.poll(() => topology(ns), POLL).toEqual({ A: ["B"], C: ["B"] });
    });

    it("discovering a service that does not exist records nothing; one that exists without instances is recorded", async () => {
      const ns = await setUp();
      expect((await get(`${services(ns)}/ghost/instances`, { "x-gov-consumer": "A" })).json).toEqual([]);
      expect((await get(`${services(ns)}/ghost/lb`, { "x-gov-consumer": "A" })).status).toBe(404);
      const connect = createClient(RegistryService, createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
      await connect.chooseInstance({ namespace: ns, serviceId: "phantom" }, { headers: { "X-Gov-Consumer": "C" } }).catch(() => undefined);
      const watch = new AbortController();
      for await (const change of connect.watchInstances({ namespace: ns, serviceId: "spectre" }, { headers: { "X-Gov-Consumer": "C" }, signal: watch.signal })) {
        expect(change.op).toBe("current"); // no instances
        break;
      }
      watch.abort();
      // C exists and has no instance: recorded (after the look-ups above, which ran first)
      expect((await get(`${services(ns)}/C/instances`, { "x-gov-consumer": "A" })).json).toEqual([]);
      await expect.poll(() => topology(ns), POLL).toEqual({ A: ["C"] });
      expect((await stores.topology.edges(ns, 0)).map((e) => `${e.consumer}>${e.producer}`)).toEqual(["A>C"]);
    });

    it("a consumer that discovers before it is a service is recorded once it registers, seconds later rather than a minute", async () => {
      const ns = await setUp();
      await get(`${services(ns)}/B/instances`, { "x-gov-consumer": "late" }); // not a service of ns yet: nothing recorded
      expect((await put(`${services(ns)}/late`)).statusCode).toBe(200);
      skipped += UNKNOWN_CONSUMER_RETRY_MS + 1; // well inside EDGE_WRITE_INTERVAL_MS
      // The first discovery's edge write is not awaited: until its "not a service yet" comes back, the edge is still
      // held back for a minute; so discover again on each poll (the clock stays put: one retry interval later).
      await expect
        .poll(async () => {
          await get(`${services(ns)}/B/instances`, { "x-gov-consumer": "late" });
          return topology(ns);
        }, POLL)
        .toEqual({ late: ["B"] });
    });

    it("a consumer in another namespace (X-Gov-Consumer-Namespace) gets the producer as {ns}.{serviceId}", async () => {
      const home = await setUp();
      const other = await setUp();
      await get(`${services(other)}/B/instances`, { "x-gov-consumer": "A", "x-gov-consumer-namespace": home });
      await expect.poll(() => topology(home), POLL).toEqual({ A: [`${other}.B`] });
      expect(await topology(other)).toEqual({});
    });

    it("a producer in a namespace that starts with a dot (`.{x}`) is listed like any other (it was stored, never listed)", async () => {
      const home = await setUp();
      const other = stores.add(`.${freshNamespace()}`);
      expect((await put(`${services(other)}/B/instances`, { schema: "http", host: "b", port: 1 })).statusCode).toBe(200);
      await get(`${services(other)}/B/instances`, { "x-gov-consumer": "A", "x-gov-consumer-namespace": home });
      await expect.poll(() => topology(home), POLL).toEqual({ A: [`${other}.B`] });
    });

    it("an edge whose consumer, producer or producer's namespace was deleted since is no longer listed (it stayed a day)", async () => {
      const home = await setUp();
      const other = await setUp();
      const del = async (path: string) => (await proc.http.inject({ method: "DELETE", url: path })).statusCode;
      for (const [ns, id] of [[home, "C"], [home, "B"], [other, "B"]]) {
        await get(`${services(ns)}/${id}/instances`, { "x-gov-consumer": "A", "x-gov-consumer-namespace": home });
      }
      await get(`${services(home)}/A/instances`, { "x-gov-consumer": "C" });
      await expect.poll(() => topology(home), POLL).toEqual({ A: ["B", "C", `${other}.B`].sort(), C: ["A"] });
      expect(await del(`${services(home)}/C`)).toBe(200); // a producer, and a consumer
      expect(await topology(home)).toEqual({ A: ["B", `${other}.B`].sort() });
      expect(await del(`/v1/namespaces/${seg(other)}?force=true`)).toBe(200); // a producer's namespace
      expect(await topology(home)).toEqual({ A: ["B"] });
      // and a deleted consumer's edges go with it
      expect(await del(`${services(home)}/A`)).toBe(200);
      expect(await topology(home)).toEqual({});
      // created again under the same names (later than the hosts' clocks may differ): nobody has discovered the new
      // services, so the old edges stay gone (they came back with them: a day-old dependency on a new service)
      skipped += CLOCK_SKEW_ALLOWANCE_MS + 1;
      for (const id of ["A", "C"]) expect((await put(`${services(home)}/${id}`)).statusCode).toBe(200);
      expect((await put(`${services(other)}/B/instances`, { schema: "http", host: "b", port: 1 })).statusCode).toBe(200);
      expect(await topology(home)).toEqual({});
      // discovered again (past the recorder's one write per edge and minute): listed again
      skipped += EDGE_WRITE_INTERVAL_MS + 1;
      await get(`${services(other)}/B/instances`, { "x-gov-consumer": "A", "x-gov-consumer-namespace": home });
      await expect.poll(() => topology(home), POLL).toEqual({ A: [`${other}.B`] });
    });

    it("a service created on a host whose clock runs up to a second ahead keeps the edges discovered right after", async () => {
      const ns = await setUp();
      await stores.registry.putService(ns, "P", now() + CLOCK_SKEW_ALLOWANCE_MS - 100); // its birth, by the other host's clock
      await get(`${services(ns)}/P/instances`, { "x-gov-consumer": "A" });
      await expect.poll(() => topology(ns), POLL).toEqual({ A: ["P"] });
    });

    it("the answer is what /openapi.json says it is: a map of producer arrays (it said objects of {values: [Value]})", async () => {
      const ns = await setUp();
      await get(`${services(ns)}/B/instances`, { "x-gov-consumer": "A" });
      await expect.poll(() => topology(ns), POLL).toEqual({ A: ["B"] });
      const doc = (await get("/openapi.json")).json as { paths: Record<string, { get: { responses: Record<string, { content: Record<string, { schema: object }> }> } }> };
      const schema = doc.paths["/v1/namespaces/{namespace}/stat/topology"].get.responses["200"].content["application/json"].schema;
      const validate = new Ajv2020({ strict: false }).compile(schema);
      expect(validate(await topology(ns)), JSON.stringify(validate.errors)).toBe(true);
      expect(schema).toMatchObject({ type: "object", additionalProperties: { type: "array" } });
    });

    it("over Connect: the same header as request metadata; the topology read over Connect", async () => {
      const ns = await setUp();
      const transport = createConnectTransport({ baseUrl: url, httpVersion: "1.1" });
      await createClient(RegistryService, transport).chooseInstance({ namespace: ns, serviceId: "B" }, { headers: { "X-Gov-Consumer": "C" } });
      const stats = createClient(StatsService, transport);
      await expect.poll(async () => Object.keys((await stats.getTopology({ namespace: ns })).consumers), POLL).toEqual(["C"]);
      const { consumers } = await stats.getTopology({ namespace: ns });
      expect(consumers.C.values.map((v) => v.kind.value)).toEqual(["B"]);
    });

    it("the registry client's discovery (its instance watch) records the edge from its serviceId and namespace", async () => {
      const ns = await setUp();
      const other = await setUp();
      const client = createRegistryClient({ baseUrl: url, namespace: ns, serviceId: "A" });
      try {
        expect(await client.instances("B")).toHaveLength(1);
        await expect.poll(() => topology(ns), POLL).toEqual({ A: ["B"] });
        expect(await topology(other)).toEqual({});
      } finally {
        await client.close();
      }
    });

    it("consumer ids beyond ASCII make edges under their own names: the registry client's RFC 8187 form, curl's UTF-8 bytes, a raw Latin-1 byte", async () => {
      const ns = await setUp();
      for (const id of ["支付", "café", "naïve"]) await put(`${services(ns)}/${encodeURIComponent(id)}`);
      const client = createRegistryClient({ baseUrl: url, namespace: ns, serviceId: "支付" });
      try {
        expect(await client.instances("B")).toHaveLength(1);
      } finally {
        await client.close();
      }
      // what curl sends from a UTF-8 terminal: the bytes of "café" (HTTP hands them over one character per byte)
      expect((await get(`${services(ns)}/B/instances`, { "x-gov-consumer": Buffer.from("café").toString("latin1") })).status).toBe(200);
      // a client that sends Latin-1: "ï" as the one byte 0xEF, which is no UTF-8 sequence here
      expect((await get(`${services(ns)}/B/instances`, { "x-gov-consumer": "naïve" })).status).toBe(200);
      await expect.poll(() => topology(ns), POLL).toEqual({ 支付: ["B"], café: ["B"], naïve: ["B"] });
    });

    it("10,000 edges to producers whose names hold many dots are read without holding the event loop (it was held 4.4 s)", async () => {
      // Names the API accepts: 100 consumers in `home`, 100 producers in `other` whose ids hold ":" and 100 dots, so
      // that every dot of `{other}.p1: . . .` once stood for a namespace to try, each refused with a whole error, on
      // every edge (10,000 tries of 100 dots) whose producer was deleted since.
      const home = stores.add(freshNamespace());
      const other = stores.add(freshNamespace());
      const born = now() - 1000;
      const consumers = Array.from({ length: 100 }, (_, i) => `c${i}`);
      const producers = Array.from({ length: 100 }, (_, i) => `p${i}:${" .".repeat(100)}x`);
      await Promise.all([...consumers.map((c) => stores.registry.putService(home, c, born)), ...producers.map((p) => stores.registry.putService(other, p, born))]);
      for (const c of consumers) await Promise.all(producers.map((p) => stores.topology.touch(home, c, `${other}.${p}`, now())));
      // deleted since (their edges stay a day): no reading of their names ends early on a service that exists
      for (const p of producers.slice(1)) await stores.registry.deleteService(other, p, now());
      const stalls = stallMonitor();
      const started = performance.now();
      const answer = (await topology(home)) as Record<string, string[]>;
      const elapsed = performance.now() - started;
      const stall = stalls.stop();
      expect(Object.keys(answer)).toHaveLength(100);
      expect(answer.c7).toEqual([`${other}.${producers[0]}`]);
      expect(elapsed, "the whole read").toBeLessThan(2000);
      expect(stall, "longest event-loop stall").toBeLessThan(50);
    }, 60_000);

    it("an edge not seen for gov.topology.edge-ttl disappears from the topology, and the worker prunes it", async () => {
      const ns = await setUp();
      await get(`${services(ns)}/B/instances`, { "x-gov-consumer": "A" });
      await expect.poll(() => topology(ns), POLL).toEqual({ A: ["B"] });
      skipped += EDGE_TTL_MS + 1000;
      expect(await topology(ns)).toEqual({});
      await expect.poll(() => stores.topology.edges(ns, 0), POLL).toEqual([]);
    });
  });
}
