import { countingRequest, measureFanOut, type ByteCounter } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryRegistryStore } from "../src/index.js";
import type { RegistryStore } from "../src/store/registry-store.js";
import { createRegistryGateway, ns, seg, type RegistryGateway } from "./harness.js";

const INSTANCES = 1000;
const WATCHERS = 200;
/** The contract's bound (~50 ms); the stall is this thread's own CPU time between turns (see stallMonitor). */
const MAX_STALL_MS = 50;

/**
 * The change feed is interrupted (on Redis: the Pub/Sub connection dropped and came back) and every watch of a large
 * service re-reads and re-sends the whole list at once. The resync must reach every watcher without holding the event
 * loop: the lists are made, serialized and written over several turns.
 */
describe("a resync of many watches of a large service", () => {
  const memory = createMemoryRegistryStore();
  const resyncs = new Set<() => void>();
  // The feed's interruption, as the Redis store reports it: every subscriber's onResync at once.
  const store: RegistryStore = {
    ...memory,
    subscribe(listener, onResync) {
      const unsubscribe = memory.subscribe(listener, onResync);
      if (onResync) resyncs.add(onResync);
      return () => {
        if (onResync) resyncs.delete(onResync);
        unsubscribe();
      };
    },
  };
  let gw: RegistryGateway;
  let url: URL;
  let watchers: ByteCounter[] = [];
  beforeAll(async () => {
    gw = await createRegistryGateway(store);
    url = new URL((await gw.listen()).url);
  });
  afterAll(async () => {
    for (const w of watchers) w.close();
    await gw?.close();
  });

  it(`reaches ${WATCHERS} SSE watchers of ${INSTANCES} instances without stalling the server over ${MAX_STALL_MS} ms`, { timeout: 60_000 }, async () => {
    const namespace = ns("resync");
    const now = Date.now();
    for (let k = 0; k < INSTANCES; k++) {
      const host = `10.0.${k >> 8}.${k & 255}`;
      await memory.register(
        namespace,
        { instanceId: `order@http#${host}#8080`, serviceId: "order", schema: "http", host, port: 8080, weight: 1, isEphemeral: true, ttlAt: now + 600_000, ttlMs: 600_000, metadata: { zone: "a" } } as never,
        now,
      );
    }
    const path = `/v1/namespaces/${seg(namespace)}/services/order/instances/watch`;
    watchers = Array.from({ length: WATCHERS }, () => countingRequest(url, "GET", path, ["Accept: text/event-stream"]));
    // After the first message (the whole list, ~213 KiB each), the resync sends it again to every watch.
    const listBytes = 200_000;
    const { stallMs } = await measureFanOut(watchers, listBytes, async () => resyncs.forEach((resync) => resync()), listBytes);
    console.info(`resync of ${INSTANCES} instances to ${WATCHERS} watchers: longest stall ${stallMs.toFixed(1)} ms`);
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
  });
});
