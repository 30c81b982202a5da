// The registry's REST watches name the state each event leaves the client in (its `hash`, as the SSE `id:`), and a
// client that reconnects with Last-Event-ID naming the state as it still is gets no "current" (contract §3).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRegistryGateway, DIGEST, ns, readSse, registryClients, seg, storeTargets, type RegistryGateway } from "./harness.js";

interface Received {
  id: string | undefined;
  data: { op: string; hash: string; instances?: unknown[]; serviceIds?: string[] };
}

/** A REST watch's events as they arrive; `lastEventId` is sent as Last-Event-ID. */
async function openWatch(url: string, lastEventId?: string) {
  const stop = new AbortController();
  const events: Received[] = [];
  const sse = await readSse(url, stop.signal, (data, _event, id) => void events.push({ id, data: data as Received["data"] }), lastEventId ? { "Last-Event-ID": lastEventId } : {});
  expect(sse.status).toBe(200);
  return {
    events,
    /** Resolves once `count` events arrived (a Redis Cluster's feed may take a moment). */
    received: (count: number) => expect.poll(() => events.length, { timeout: 3000, interval: 10 }).toBeGreaterThanOrEqual(count),
    ids: () => events.map((e) => e.id),
    async close() {
      stop.abort();
      await sse.done;
    },
  };
}

/** Every event carries an `id:`, and it is the message's `hash`. */
function expectIdsAreHashes(events: Received[]): void {
  for (const e of events) expect([e.id, e.data.hash]).toEqual([expect.stringMatching(DIGEST), e.id]);
}

for (const target of storeTargets()) {
  describe.skipIf(target.skip)(`registry watches over SSE: id lines and Last-Event-ID, on the ${target.name} store`, () => {
    let gw: RegistryGateway;
    let url: string;
    let client: ReturnType<typeof registryClients>[number]["client"];
    beforeAll(async () => {
      gw = await createRegistryGateway(await target.open());
      const urls = await gw.listen();
      url = urls.url;
      [{ client }] = registryClients(urls);
    });
    afterAll(async () => gw?.close());

    const instancesWatch = (n: string) => `${url}/v1/namespaces/${seg(n)}/services/s/instances/watch`;
    const servicesWatch = (n: string) => `${url}/v1/namespaces/${seg(n)}/services/watch`;
    // fixed instances: no ttl, so the same instance is the same in every namespace
    const register = (n: string, host: string) => client.registerInstance({ namespace: n, serviceId: "s", schema: "http", host, port: 1, isEphemeral: false });
    const deregister = (n: string, host: string) => client.deregisterInstance({ namespace: n, serviceId: "s", instanceId: `s@http#${host}#1` });

    it("instance watch: every event has an id; equal states have equal ids, whatever the order of the changes", async () => {
      const [n1, n2] = [ns("ida"), ns("idb")];
      const [w1, w2] = [await openWatch(instancesWatch(n1)), await openWatch(instancesWatch(n2))];
      try {
        await register(n1, "a");
        await register(n1, "b");
        await register(n2, "b");
        await register(n2, "a");
        await Promise.all([w1.received(3), w2.received(3)]);
        await deregister(n1, "b");
        await w1.received(4);
        expect(w1.events.map((e) => e.data.op)).toEqual(["current", "register", "register", "deregister"]);
        expectIdsAreHashes([...w1.events, ...w2.events]);
        const [one, two] = [w1.ids(), w2.ids()];
        expect(two[0]).toBe(one[0]); // both empty
        expect(two[2]).toBe(one[2]); // {a, b}
        expect(new Set([one[0], one[1], two[1], one[2]]).size).toBe(4);
        expect(one[3]).toBe(one[1]); // {a} again
      } finally {
        await Promise.all([w1.close(), w2.close()]);
      }
    });

    it("instance watch: reconnecting with the last id gets no current while nothing changed, and current after a change", async () => {
      const n = ns("resume");
      await register(n, "a");
      const first = await openWatch(instancesWatch(n));
      await first.received(1);
      await first.close();
      // nothing changed: the stream goes on from the state the client has
      const same = await openWatch(instancesWatch(n), first.ids().at(-1));
      await register(n, "b");
      await same.received(1);
      await same.close();
      expect(same.events.map((e) => e.data.op)).toEqual(["register"]);
      expectIdsAreHashes(same.events);
      // a change while the client was away: the state as it is now comes first
      await register(n, "c");
      const changed = await openWatch(instancesWatch(n), same.ids().at(-1));
      await changed.received(1);
      await changed.close();
      expect([changed.events[0].data.op, changed.events[0].data.instances?.length]).toEqual(["current", 3]);
      expectIdsAreHashes(changed.events);
    });

    it("service-list watch: every event has an id; equal lists have equal ids; the last id skips current while nothing changed", async () => {
      const [n1, n2] = [ns("sida"), ns("sidb")];
      const [w1, w2] = [await openWatch(servicesWatch(n1)), await openWatch(servicesWatch(n2))];
      try {
        // one at a time: changes that arrive together are reported in the list's order
        for (const [n, id, w, count] of [[n1, "a", w1, 2], [n1, "b", w1, 3], [n2, "b", w2, 2], [n2, "a", w2, 3]] as const) {
          await client.putService({ namespace: n, serviceId: id });
          await w.received(count);
        }
        await client.deleteService({ namespace: n1, serviceId: "b" });
        await w1.received(4);
        expect(w1.events.map((e) => e.data.op)).toEqual(["current", "add", "add", "remove"]);
        expectIdsAreHashes([...w1.events, ...w2.events]);
        const [one, two] = [w1.ids(), w2.ids()];
        expect([two[0], two[2]]).toEqual([one[0], one[2]]);
        expect(new Set([one[0], one[1], two[1], one[2]]).size).toBe(4);
        expect(one[3]).toBe(one[1]);
      } finally {
        await Promise.all([w1.close(), w2.close()]);
      }
      const same = await openWatch(servicesWatch(n1), w1.ids().at(-1));
      await client.putService({ namespace: n1, serviceId: "c" });
      await same.received(1);
      await same.close();
      expect(same.events.map((e) => e.data.op)).toEqual(["add"]);
      const changed = await openWatch(servicesWatch(n2), w1.ids().at(-1)); // another list than the one named
      await changed.received(1);
      await changed.close();
      expect([changed.events[0].data.op, changed.events[0].data.serviceIds]).toEqual(["current", ["a", "b"]]);
    });
  });
}
