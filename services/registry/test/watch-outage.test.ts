import { storeOutage } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryRegistryStore } from "../src/index.js";
import type { RegistryStore } from "../src/store/registry-store.js";
import { createRegistryGateway, ns, registryClients, type RegistryGateway } from "./harness.js";

/**
 * A failover in the middle of a watch: the change event arrives while the service's keys cannot be read for a moment.
 * The instance and service-list watches wait the outage out and deliver; they used to end with `unavailable`.
 */
describe("registry watches across a store outage in the middle of them", () => {
  const state = storeOutage();
  const memory = createMemoryRegistryStore();
  const store: RegistryStore = {
    ...memory,
    getInstance: state.failing(memory.getInstance.bind(memory)),
    listInstances: state.failing(memory.listInstances.bind(memory)),
    listServices: state.failing(memory.listServices.bind(memory)),
  };
  let gw: RegistryGateway;
  let urls: { url: string; grpcUrl: string };
  beforeAll(async () => {
    gw = await createRegistryGateway(store);
    urls = await gw.listen();
  });
  afterAll(() => gw?.close());

  it("deliver the registration made during the outage once the store answers again", async () => {
    const namespace = ns("outage");
    const [{ client }] = registryClients(urls);
    await client.registerInstance({ namespace, serviceId: "order", schema: "http", host: "h1", port: 80, isEphemeral: false });
    const instances: string[] = [];
    const services: string[] = [];
    const ended: string[] = [];
    const ac = new AbortController();
    void (async () => {
      try {
        for await (const ev of client.watchInstances({ namespace, serviceId: "order" }, { signal: ac.signal })) instances.push(ev.op);
      } catch (err) {
        ended.push(`instances: ${String(err)}`);
      }
    })();
    void (async () => {
      try {
        for await (const ev of client.watchServices({ namespace }, { signal: ac.signal })) services.push(ev.op);
      } catch (err) {
        ended.push(`services: ${String(err)}`);
      }
    })();
    await expect.poll(() => [instances, services], { timeout: 10_000 }).toEqual([["current"], ["current"]]);
    state.down = true;
    // written through the underlying store: the events arrive, the watches' reads fail
    await memory.register(namespace, { instanceId: "order@http#h2#80", serviceId: "order", schema: "http", host: "h2", port: 80, weight: 1, isEphemeral: false, metadata: {} } as never, Date.now());
    await memory.register(namespace, { instanceId: "pay@http#h3#80", serviceId: "pay", schema: "http", host: "h3", port: 80, weight: 1, isEphemeral: false, metadata: {} } as never, Date.now());
    await expect.poll(() => state.refused, { timeout: 10_000 }).toBeGreaterThanOrEqual(4);
    state.down = false;
    try {
      await expect.poll(() => [instances.at(-1), services.at(-1)], { timeout: 10_000 }).toEqual(["register", "add"]);
      expect(ended).toEqual([]);
    } finally {
      ac.abort();
    }
  });
});
