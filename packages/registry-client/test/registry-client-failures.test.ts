import net from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createRegistryGateway, ns, type RegistryGateway } from "../../../services/registry/test/harness.js";
import { createMemoryRegistryStore } from "@gov/registry-service";
import { ns as secureNs, ROOT_PASSWORD, startSecure, type SecureProcess } from "../../../services/security/test/harness.js";
import { ClientClosedError, createRegistryClient } from "../src/index.js";

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
