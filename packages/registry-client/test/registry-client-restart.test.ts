import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { createMemoryRegistryStore } from "@gov/registry-service";
import { freePort } from "@gov/testkit";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createRegistryGateway, ns, type RegistryGateway } from "../../../services/registry/test/harness.js";
import { createRegistryClient, type RegistryClient, type RegistryEvent } from "../src/index.js";
import { countingTransport } from "./support.js";

/** The registry process stops and a new one (with an empty embedded store) starts on the same port. */
describe("registry client across a registry restart", () => {
  const gateways: RegistryGateway[] = [];
  const clients: RegistryClient[] = [];
  const start = async (port: number, grpcPort = 0) => {
    const g = await createRegistryGateway(createMemoryRegistryStore());
    gateways.push(g);
    await g.proc.listen({ port, grpcPort, managementPort: 0, host: "127.0.0.1" });
    return g;
  };
  afterEach(async () => {
    await Promise.allSettled(clients.splice(0).map((c) => c.close()));
    await Promise.allSettled(gateways.splice(0).map((g) => g.close()));
  });

  it("retries renewals while it is down, registers again when it is back, and the watch reconnects and re-reads", async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const namespace = ns("restart-");
    const first = await start(port);

    const events: RegistryEvent[] = [];
    const a = createRegistryClient({ baseUrl: url, namespace, serviceId: "order", ttlMs: 1000, retry: { initialMs: 50, maxMs: 200 } });
    const counted = countingTransport(createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
    const b = createRegistryClient({ transport: counted.transport, namespace, serviceId: "checkout", retry: { initialMs: 50, maxMs: 200 } });
    clients.push(a, b);
    a.on((e) => events.push(e));
    b.on((e) => events.push(e));
    const { instanceId } = await a.register({ schema: "http", host: "10.0.0.1", port: 8080 });
    // An instance nobody renews or registers again: the new process will not have it, so the re-read must drop it.
    const remote = createClient(RegistryService, createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
    await remote.registerInstance({ namespace, serviceId: "order", schema: "http", host: "10.0.0.9", port: 8080, isEphemeral: false });
    const stale = "order@http#10.0.0.9#8080";
    await vi.waitFor(async () => expect((await b.instances("order")).map((i) => i.instanceId)).toEqual([instanceId, stale]), { timeout: 2000, interval: 10 });

    await first.close();
    await vi.waitFor(() => expect(events.some((e) => e.type === "watch-failed")).toBe(true), { timeout: 5000, interval: 10 });
    await vi.waitFor(() => expect(events.some((e) => e.type === "renew-failed" && e.retryInMs > 0)).toBe(true), { timeout: 5000, interval: 10 });
    // While the registry is down the cache keeps answering with what it last knew.
    expect((await b.instances("order")).map((i) => i.instanceId)).toEqual([instanceId, stale]);

    // The new process knows nothing: the renewal gets not_found, the client registers again, and the reconnected
    // watch's first message replaces the cache, then the registration arrives as a change.
    await start(port);
    await vi.waitFor(() => expect(events.some((e) => e.type === "re-registered")).toBe(true), { timeout: 5000, interval: 10 });
    await vi.waitFor(async () => expect((await b.instances("order")).map((i) => i.instanceId)).toEqual([instanceId]), { timeout: 5000, interval: 10 });
    expect((await remote.listInstances({ namespace, serviceId: "order" })).instances.map((i) => i.instanceId)).toEqual([instanceId]);
    expect(new Set(counted.log.calls.map((c) => c.method))).toEqual(new Set(["WatchInstances"])); // reconnects only, no polling
  });

  it("keepalive mode: the stream breaks with the registry, reconnects with backoff and registers the instance again", async () => {
    const [port, grpcPort] = [await freePort(), await freePort()];
    const url = `http://127.0.0.1:${port}`;
    const namespace = ns("karestart-");
    const first = await start(port, grpcPort);
    const events: RegistryEvent[] = [];
    const a = createRegistryClient({ baseUrl: url, keepalive: { baseUrl: `http://127.0.0.1:${grpcPort}` }, namespace, serviceId: "order", ttlMs: 1000, retry: { initialMs: 50, maxMs: 200 } });
    clients.push(a);
    a.on((e) => events.push(e));
    const registration = await a.register({ schema: "http", host: "10.0.0.1", port: 8080 });

    await first.close();
    await vi.waitFor(() => expect(events.some((e) => e.type === "renew-failed" && e.retryInMs > 0)).toBe(true), { timeout: 5000, interval: 10 });
    expect(registration.state).toBe("retrying");

    // The new process knows nothing: the reopened stream's first message registers the instance there.
    await start(port, grpcPort);
    await vi.waitFor(() => expect(events.some((e) => e.type === "re-registered")).toBe(true), { timeout: 5000, interval: 10 });
    const remote = createClient(RegistryService, createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
    expect((await remote.listInstances({ namespace, serviceId: "order" })).instances.map((i) => i.instanceId)).toEqual([registration.instanceId]);
    await vi.waitFor(() => expect(registration.state).toBe("registered"), { timeout: 2000, interval: 10 });

    // It keeps renewing through the new stream; close() ends it and deregisters.
    const renewed = events.filter((e) => e.type === "renewed").length;
    await vi.waitFor(() => expect(events.filter((e) => e.type === "renewed").length).toBeGreaterThan(renewed), { timeout: 3000, interval: 10 });
    await a.close();
    expect((await remote.listInstances({ namespace, serviceId: "order" })).instances).toEqual([]);
  });
});
