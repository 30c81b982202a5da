import { connect, type Socket } from "node:net";
import { createMemoryConfigStore } from "@gov/config-service";
import { stallMonitor } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestGateway, ns, seg, TEST_LIMITS, type TestGateway } from "./harness.js";

const MiB = 1024 * 1024;
const WATCHERS = 200;
/** The contract's bound (~50 ms); the stall is this thread's own CPU time between turns (see stallMonitor). */
const MAX_STALL_MS = 50;

/**
 * A change to a large config, fanned out to many watchers, must not hold the event loop: every watcher's message used
 * to be written in the same turn (100 watchers of a 1 MiB config: ~130 ms here, ~300 ms at 300 watchers), and every
 * other request waited for the last of them.
 */
describe("a large config's change to many SSE watchers", () => {
  let gw: TestGateway;
  let url: URL;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    gw = await createTestGateway(createMemoryConfigStore({ maxVersions: 10 }), { ...TEST_LIMITS, maxContentBytes: MiB });
    url = new URL((await gw.listen()).url);
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await gw?.close();
  });

  /** An SSE watch on a raw socket that counts what arrives (no parsing: the test's reading costs next to nothing). */
  function watch(path: string): { received: () => number } {
    const socket = connect(Number(url.port), url.hostname);
    sockets.push(socket);
    let bytes = 0;
    socket.on("data", (chunk: Buffer) => (bytes += chunk.length));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: text/event-stream\r\n\r\n`);
    return { received: () => bytes };
  }

  it(`reaches ${WATCHERS} watchers without stalling the server over ${MAX_STALL_MS} ms, and a GET is answered meanwhile`, { timeout: 60_000 }, async () => {
    const path = `/v1/namespaces/${seg(ns())}/configs/big.yaml`;
    expect((await fetch(`${url.origin}${path}`, { method: "PUT", body: "small: true\n" })).status).toBe(200);
    const watchers = Array.from({ length: WATCHERS }, () => watch(`${path}/watch`));
    await expect.poll(() => watchers.every((w) => w.received() > 0), { timeout: 20_000, interval: 20 }).toBe(true);
    const before = watchers.map((w) => w.received());

    const stalls = stallMonitor();
    const big = `data: ${"x".repeat(MiB - 16)}\n`;
    expect((await fetch(`${url.origin}${path}`, { method: "PUT", body: big })).status).toBe(200);
    // A cheap request while the change is on its way to the watchers.
    const probe = fetch(`${url.origin}/v1/namespaces/${seg(ns())}/configs`).then((r) => r.status);
    await expect
      .poll(() => watchers.filter((w, i) => w.received() - before[i] >= big.length).length, { timeout: 30_000, interval: 20 })
      .toBe(WATCHERS);
    const stallMs = stalls.stop();
    expect(await probe).toBe(200);
    console.info(`1 MiB to ${WATCHERS} watchers: longest stall ${stallMs.toFixed(1)} ms`);
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
  });
});
