import { connect, type Socket } from "node:net";
import { stallMonitor } from "@gov/testkit";
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
  const sockets: Socket[] = [];
  beforeAll(async () => {
    gw = await createRegistryGateway(store);
    url = new URL((await gw.listen()).url);
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await gw?.close();
  });

  /** An SSE watch on a raw socket that only counts what arrives (the test's reading costs next to nothing). */
  function watch(path: string): { received: () => number } {
    const socket = connect(Number(url.port), url.hostname);
    sockets.push(socket);
    let bytes = 0;
    socket.on("data", (chunk: Buffer) => (bytes += chunk.length));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: text/event-stream\r\n\r\n`);
    return { received: () => bytes };
  }

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
    const watchers = Array.from({ length: WATCHERS }, () => watch(`/v1/namespaces/${seg(namespace)}/services/order/instances/watch`));
    // Every first message (the whole list) has arrived: nothing more comes until the resync.
    let settled = watchers.map((w) => w.received());
    await expect.poll(() => ((settled = watchers.map((w) => w.received())), settled.every((b) => b > 100_000)), { timeout: 30_000, interval: 50 }).toBe(true);
    await expect.poll(() => ((settled = watchers.map((w) => w.received())), settled), { timeout: 5_000, interval: 100 }).toEqual(settled);
    const listBytes = Math.min(...settled);

    const stalls = stallMonitor();
    for (const resync of resyncs) resync();
    await expect
      .poll(() => watchers.filter((w, i) => w.received() - settled[i] >= listBytes * 0.9).length, { timeout: 30_000, interval: 20 })
      .toBe(WATCHERS);
    const stallMs = stalls.stop();
    console.info(`resync of ${INSTANCES} instances to ${WATCHERS} watchers (~${Math.round(listBytes / 1024)} KiB each): longest stall ${stallMs.toFixed(1)} ms`);
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
  });
});
