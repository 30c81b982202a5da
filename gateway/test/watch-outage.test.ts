import { readSse, storeOutage } from "@gov/testkit";
import { createMemoryConfigStore, type ConfigStore } from "@gov/config-service";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configClients, createTestGateway, ns, type TestGateway } from "./harness.js";

/**
 * A failover in the middle of a watch: the change event arrives (the subscriber's node is alive) while the config's
 * own node cannot be read for a moment. The watch waits the outage out and delivers the change; it used to end with
 * `unavailable`, leaving every client to reopen it.
 */
describe("a config watch across a store outage in the middle of it", () => {
  const state = storeOutage();
  const memory = createMemoryConfigStore({ maxVersions: 10 });
  const store: ConfigStore = { ...memory, get: state.failing(memory.get.bind(memory)) };
  let gw: TestGateway;
  let urls: { url: string; grpcUrl: string };
  beforeAll(async () => {
    gw = await createTestGateway(store);
    urls = await gw.listen();
  });
  afterAll(() => gw?.close());

  it("delivers the change once the store answers again, on Connect, gRPC and SSE", async () => {
    const namespace = ns("outage");
    await memory.set(namespace, "a.yaml", "v1", "h1", Date.now());
    const seen: Record<string, string[]> = {};
    const ended: Record<string, string> = {};
    const ac = new AbortController();
    for (const { name, client } of configClients(urls)) {
      seen[name] = [];
      void (async () => {
        try {
          for await (const ev of client.watchConfig({ namespace, configId: "a.yaml" }, { signal: ac.signal })) seen[name].push(`${ev.op}:${ev.config?.data ?? ""}`);
          ended[name] = "end";
        } catch (err) {
          ended[name] = String(err);
        }
      })();
    }
    seen.sse = [];
    await readSse(`${urls.url}/v1/namespaces/${encodeURIComponent(namespace)}/configs/a.yaml/watch`, ac.signal, (data, event) => {
      const ev = data as { op: string; code: string; config?: { data: string } };
      if (event === "error") ended.sse = ev.code;
      else seen.sse.push(`${ev.op}:${ev.config?.data ?? ""}`);
    });
    const names = Object.keys(seen);
    await expect.poll(() => names.map((n) => seen[n].length > 0), { timeout: 10_000 }).toEqual(names.map(() => true));

    state.down = true;
    await memory.set(namespace, "a.yaml", "v2", "h2", Date.now()); // the event arrives; its read fails
    await expect.poll(() => state.refused, { timeout: 10_000 }).toBeGreaterThanOrEqual(names.length * 2); // retried
    state.down = false;
    try {
      await expect.poll(() => names.map((n) => seen[n].at(-1)), { timeout: 10_000 }).toEqual(names.map(() => "set:v2"));
      expect(ended).toEqual({});
    } finally {
      ac.abort();
    }
  });
});
