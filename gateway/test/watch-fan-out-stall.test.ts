import { create, toBinary } from "@bufbuild/protobuf";
import { WatchConfigRequestSchema } from "@gov/api";
import { createMemoryConfigStore } from "@gov/config-service";
import { countingRequest, measureFanOut, type ByteCounter } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestGateway, ns, seg, TEST_LIMITS, type TestGateway } from "./harness.js";

const MiB = 1024 * 1024;
const WATCHERS = 200;
/** The contract's bound (~50 ms); the stall is this thread's own CPU time between turns (see stallMonitor). */
const MAX_STALL_MS = 50;

/** An enveloped message of the Connect streaming protocol: flags, big-endian length, payload. */
function enveloped(payload: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

/**
 * A change to a large config, fanned out to many watchers, must not hold the event loop: every watcher's message used
 * to be written in the same turn (200 watchers of a 1 MiB config: ~270 ms on SSE here, ~1 s on a Connect JSON stream,
 * which serializes the message for each watcher), and every other request waited for the last of them.
 */
describe("a large config's change to many watchers", () => {
  let gw: TestGateway;
  let url: URL;
  const watchers: ByteCounter[] = [];
  beforeAll(async () => {
    gw = await createTestGateway(createMemoryConfigStore({ maxVersions: 10 }), { ...TEST_LIMITS, maxContentBytes: MiB });
    url = new URL((await gw.listen()).url);
  });
  afterAll(async () => {
    for (const w of watchers) w.close();
    await gw?.close();
  });

  const watch = (method: string, path: string, headers: string[], body?: Uint8Array) => {
    const counter = countingRequest(url, method, path, headers, body);
    watchers.push(counter);
    return counter;
  };

  const protocols = [
    { name: "SSE", open: (namespace: string) => watch("GET", `/v1/namespaces/${seg(namespace)}/configs/big.yaml/watch`, ["Accept: text/event-stream"]) },
    {
      name: "a Connect stream (JSON)",
      open: (namespace: string) =>
        watch("POST", "/gov.config.v1.ConfigService/WatchConfig", ["Content-Type: application/connect+json"], enveloped(Buffer.from(JSON.stringify({ namespace, configId: "big.yaml" })))),
    },
    {
      name: "gRPC-Web (protobuf)",
      open: (namespace: string) =>
        watch(
          "POST",
          "/gov.config.v1.ConfigService/WatchConfig",
          ["Content-Type: application/grpc-web+proto", "X-Grpc-Web: 1"],
          enveloped(toBinary(WatchConfigRequestSchema, create(WatchConfigRequestSchema, { namespace, configId: "big.yaml" }))),
        ),
    },
  ];

  it.each(protocols)(`reaches ${WATCHERS} watchers on $name without stalling the server over ${MAX_STALL_MS} ms`, { timeout: 60_000 }, async ({ name, open }) => {
    const namespace = ns();
    const path = `/v1/namespaces/${seg(namespace)}/configs/big.yaml`;
    expect((await fetch(`${url.origin}${path}`, { method: "PUT", body: "small: true\n" })).status).toBe(200);
    const opened = Array.from({ length: WATCHERS }, () => open(namespace));
    const big = `data: ${"x".repeat(MiB - 16)}\n`;
    let probe: Promise<number> | undefined;
    const { stallMs, cpuMs } = await measureFanOut(opened, 1, async () => {
      expect((await fetch(`${url.origin}${path}`, { method: "PUT", body: big })).status).toBe(200);
      // A cheap request while the change is on its way to the watchers.
      probe = fetch(`${url.origin}/v1/namespaces/${seg(ns())}/configs`).then((r) => r.status);
    }, big.length);
    expect(await probe).toBe(200);
    // CPU: the server's and this test's (which only counts bytes), for the whole fan-out
    console.info(`1 MiB to ${WATCHERS} watchers on ${name}: longest stall ${stallMs.toFixed(1)} ms, CPU ${Math.round(cpuMs)} ms`);
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
  });
});
