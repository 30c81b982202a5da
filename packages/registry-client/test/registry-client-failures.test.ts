import http from "node:http";
import net from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createRegistryGateway, ns, type RegistryGateway } from "../../../services/registry/test/harness.js";
import { createMemoryRegistryStore } from "@gov/registry-service";
import { ns as secureNs, ROOT_PASSWORD, startSecure, type SecureProcess } from "../../../services/security/test/harness.js";
import { ClientClosedError, createRegistryClient } from "../src/index.js";
import { countingTransport } from "./support.js";

const codeOf = (e: unknown) => (e instanceof ConnectError ? Code[e.code] : e instanceof Error ? e.constructor.name : String(e));

describe("registry client: a registry that accepts connections and never answers", () => {
  let silent: net.Server;
  let url: string;
  const sockets = new Set<net.Socket>();
  beforeAll(async () => {
    silent = net.createServer((s) => void sockets.add(s)); // reads nothing, answers nothing
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  it("instances() fails after callTimeoutMs instead of waiting for ever", async () => {
    const client = createRegistryClient({ baseUrl: url, namespace: "{dev}", serviceId: "checkout", callTimeoutMs: 300 });
    const started = performance.now();
    const outcome = await client.instances("order").catch((e: unknown) => e);
    expect([codeOf(outcome), (outcome as Error).message]).toEqual(["DeadlineExceeded", expect.stringContaining("did not answer the watch of order within 300 ms")]);
    expect(performance.now() - started).toBeLessThan(3000);
    await client.close();
  });

  it("close() while instances() waits for its first answer rejects it with ClientClosedError", async () => {
    const client = createRegistryClient({ baseUrl: url, namespace: "{dev}", serviceId: "checkout", callTimeoutMs: 60_000 });
    const waiting = client.instances("order").catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 100));
    await client.close();
    expect(await waiting).toBeInstanceOf(ClientClosedError);
  });

  it("close() in the same turn as the first instances() rejects it with ClientClosedError (it waited for ever)", async () => {
    const client = createRegistryClient({ baseUrl: url, namespace: "{dev}", serviceId: "checkout", callTimeoutMs: 60_000 });
    const waiting = client.instances("order").catch((e: unknown) => e);
    const chosen = client.choose("order").catch((e: unknown) => e);
    await client.close();
    expect(await waiting).toBeInstanceOf(ClientClosedError);
    expect(await chosen).toBeInstanceOf(ClientClosedError);
  });

  it("a keepalive registration fails after callTimeoutMs", async () => {
    const client = createRegistryClient({ baseUrl: url, namespace: "{dev}", serviceId: "checkout", callTimeoutMs: 300, keepalive: { baseUrl: url } });
    const outcome = await client.register({ schema: "http", host: "10.0.0.1", port: 80 }).catch((e: unknown) => e);
    expect([codeOf(outcome), (outcome as Error).message]).toEqual(["DeadlineExceeded", expect.stringContaining("keepalive registration within 300 ms")]);
    await client.close();
  });
});

describe("registry client: close()", () => {
  let gateway: RegistryGateway;
  let url: string;
  let grpcUrl: string;
  beforeAll(async () => {
    gateway = await createRegistryGateway(createMemoryRegistryStore());
    ({ url, grpcUrl } = await gateway.listen());
  });
  afterAll(() => gateway?.close());

  it("closes the HTTP/2 connection it opened for keepalive streams (left open, each closed client kept one)", async () => {
    const sockets = () => process.getActiveResourcesInfo().filter((r) => r === "TCPSocketWrap").length;
    const before = sockets();
    const client = createRegistryClient({ baseUrl: url, namespace: "{dev}", serviceId: "ka", keepalive: { baseUrl: grpcUrl } });
    await client.register({ schema: "http", host: "10.0.0.9", port: 80 });
    expect(sockets()).toBeGreaterThan(before); // both ends of the connection are in this process
    await client.close();
    // (the unary calls' HTTP/1.1 sockets are the agent's: it closes idle ones after 5 s; the server would keep an idle
    // HTTP/2 session for a minute)
    await vi.waitFor(() => expect(sockets()).toBeLessThanOrEqual(before), { timeout: 15_000, interval: 100 });
  });

  it("a second close() while the first deregisters waits for the deregistration too", async () => {
    const inner = createConnectTransport({ baseUrl: url, httpVersion: "1.1" });
    let deregistered = false;
    const client = createRegistryClient({
      // the deregistration takes 300 ms
      transport: {
        unary: async (method, signal, timeoutMs, header, input, ctx) => {
          const res = await inner.unary(method, signal, timeoutMs, header, input, ctx);
          if (method.name === "DeregisterInstance") {
            await new Promise((r) => setTimeout(r, 300));
            deregistered = true;
          }
          return res;
        },
        stream: (...args) => inner.stream(...args),
      },
      namespace: ns("close"),
      serviceId: "order",
    });
    await client.register({ schema: "http", host: "10.0.0.1", port: 80 });
    const first = client.close();
    const second = client.close();
    await second;
    expect(deregistered).toBe(true);
    await first;
  });
});

describe("registry client: a keepalive sent to an HTTP/1.1 port", () => {
  it("is refused with what to give instead, and close() afterwards leaves the process running (it ended it)", async () => {
    const h1 = http.createServer((_req, res) => res.writeHead(404).end());
    await new Promise<void>((resolve) => h1.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(h1.address() as net.AddressInfo).port}`;
    try {
      const client = createRegistryClient({ baseUrl: url, namespace: "{dev}", serviceId: "ka", keepalive: { baseUrl: url } });
      const outcome = await client.register({ schema: "http", host: "10.0.0.1", port: 80 }).catch((e: unknown) => e);
      expect([codeOf(outcome), (outcome as Error).message]).toEqual([
        "FailedPrecondition",
        expect.stringContaining(`the keepalive stream needs HTTP/2, and ${url} did not answer in HTTP/2 (Protocol error): give the registry's gRPC port`),
      ]);
      // at once, while the failed session still had its error to emit: an uncaught 'error' event (vitest fails on it)
      await client.close();
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      await new Promise((resolve) => h1.close(resolve));
    }
  });
});

describe("registry client: options it refuses, and a watch that stalls", () => {
  let gateway: RegistryGateway;
  let url: string;
  beforeAll(async () => {
    gateway = await createRegistryGateway(createMemoryRegistryStore());
    ({ url } = await gateway.listen());
  });
  afterAll(() => gateway?.close());

  it("refuses before sending anything: non-string metadata, a weight beyond int32, a renewal interval not below the ttl", async () => {
    const { transport, log } = countingTransport(createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
    const client = createRegistryClient({ transport, namespace: ns("opts"), serviceId: "order", ttlMs: 1000, renewEveryMs: 2500 });
    const refused = (o: Parameters<typeof client.register>[0]) => client.register(o).then(() => "registered", (e: unknown) => `${codeOf(e)}: ${(e as Error).message}`);
    const base = { schema: "http", host: "10.0.0.1", port: 80 };
    expect(await refused({ ...base, metadata: { a: 1 } as never })).toBe('InvalidArgument: [invalid_argument] metadata value of "a" is a number: metadata values are strings, so quote it');
    expect(await refused({ ...base, metadata: { c: { d: 1 } } as never })).toMatch(/metadata value of "c" is a object/);
    expect(await refused({ ...base, weight: 2 ** 40 })).toBe(`InvalidArgument: [invalid_argument] weight must be a whole number of at most 2147483647, not ${2 ** 40}`);
    expect(await refused(base)).toBe("InvalidArgument: [invalid_argument] renewEveryMs 2500 must be above 0 and below the TTL (1000 ms), or the instance expires between renewals: leave it out for a third of the TTL");
    expect(log.calls).toEqual([]);
    expect(await refused({ ...base, ttlMs: 5000 })).toBe("registered"); // 2.5 s renewals for a 5 s ttl are fine
    await client.close();
  });

  it("a watch that stalls is given up once an instance it should have renewed or expired is past its ttl: watch-failed, then reopened", async () => {
    // a proxy whose connections open so far can be frozen (nothing forwarded either way: a half-open connection, a
    // registry that stopped), while new ones pass
    const pairs: net.Socket[][] = [];
    const proxy = net.createServer((inbound) => {
      const outbound = net.connect(Number(new URL(url).port), "127.0.0.1");
      inbound.pipe(outbound).pipe(inbound);
      const close = () => (inbound.destroy(), outbound.destroy());
      inbound.on("error", close).on("close", close);
      outbound.on("error", close).on("close", close);
      pairs.push([inbound, outbound]);
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const namespace = ns("stall");
    const producer = createRegistryClient({ baseUrl: url, namespace, serviceId: "order", ttlMs: 1000 });
    const consumer = createRegistryClient({ baseUrl: `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`, namespace, serviceId: "checkout", retry: { initialMs: 50, maxMs: 100 } });
    const failures: string[] = [];
    consumer.on((e) => void (e.type === "watch-failed" && failures.push(e.error.message)));
    try {
      const { instanceId } = await producer.register({ schema: "http", host: "10.0.0.1", port: 80 });
      expect((await consumer.instances("order")).map((i) => i.instanceId)).toEqual([instanceId]);
      for (const pair of pairs) for (const socket of pair) socket.unpipe().pause();
      await producer.close(); // deregistered: news the frozen watch does not bring
      const frozenAt = Date.now();
      // the cache serves its last state meanwhile (a registry outage must not take discovery down) ...
      const stalled = `[deadline_exceeded] the watch stalled: no news of instance ${instanceId}, over 5 s past its ttl`;
      await vi.waitFor(() => expect(failures.map((m) => m.slice(0, stalled.length))).toEqual([stalled]), { timeout: 15_000, interval: 100 });
      expect(Date.now() - frozenAt).toBeGreaterThan(4_000);
      // ... and the reopened watch (a new connection) brings the registry's state
      await vi.waitFor(async () => expect(await consumer.instances("order")).toEqual([]), { timeout: 5_000, interval: 50 });
    } finally {
      await consumer.close();
      for (const pair of pairs) for (const socket of pair) socket.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});

describe("registry client: accessToken, against a registry with security on", () => {
  let p: SecureProcess;
  beforeAll(async () => {
    p = await startSecure({ name: "embedded" });
  });
  afterAll(() => p?.close());

  it("every call carries the token the function gives; without one the registry refuses", async () => {
    const namespace = secureNs("sdk");
    let asked = 0;
    const token = async () => (asked++, (await p.login("root", ROOT_PASSWORD)).accessToken);
    const client = createRegistryClient({ baseUrl: p.url, namespace, serviceId: "order", accessToken: token });
    const { instanceId } = await client.register({ schema: "http", host: "10.0.0.1", port: 80 });
    expect((await client.instances("order")).map((i) => i.instanceId)).toEqual([instanceId]);
    expect(asked).toBeGreaterThanOrEqual(2);
    await client.close();

    const anonymous = createRegistryClient({ baseUrl: p.url, namespace, serviceId: "order" });
    expect(codeOf(await anonymous.register({ schema: "http", host: "10.0.0.2", port: 80 }).catch((e: unknown) => e))).toBe("Unauthenticated");
    await anonymous.close();
  });
});
