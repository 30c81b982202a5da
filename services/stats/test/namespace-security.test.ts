import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { NamespaceService } from "@gov/api/gen/gov/stats/v1/namespace_pb";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import { createConfigModule } from "@gov/config-service";
import { createRegistryModule } from "@gov/registry-service";
import { restGateway } from "@gov/gateway";
import { createSecurityGuard, createSecurityModule } from "@gov/security-service";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStatsModule } from "../src/module.js";
import { freshSystem, namespaceTargets, ns } from "./namespace-harness.js";
import { FAST } from "./stats-harness.js";

const PASSWORD = "root-password-for-tests";
const seg = encodeURIComponent;

/**
 * The namespace service behind the security guard (contract §7): the list shows what the caller may read, creating and
 * deleting namespaces is for admins, setting the current namespace needs write permission on it. REST, Connect, gRPC,
 * on the embedded store and on Redis (names of its own per run: suites share one Redis).
 */
for (const target of namespaceTargets().filter((t) => t.name !== "redis-cluster")) describe.skipIf(target.skip)(`namespaces with security on (${target.name})`, () => {
  let proc: BuiltProcess;
  let urls: { url: string; grpcUrl?: string };
  let root: string;
  let alice: string;
  const system = freshSystem();
  const [dev, prod] = [ns("dev"), ns("prod")];

  const rest = async (method: string, path: string, token?: string, body?: unknown) => {
    const res = await fetch(`${urls.url}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as unknown) : undefined };
  };
  const login = async (user: string, password: string) => ((await rest("POST", `/v1/authenticate/${user}/login`, undefined, { password })).body as { accessToken: string }).accessToken;
  const bearer = (token: string): Interceptor => (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };

  beforeAll(async () => {
    proc = await buildProcess({
      name: "test-namespace-security",
      modules: [createConfigModule(), createRegistryModule(), createStatsModule({ worker: FAST }), createSecurityModule({ announce: () => {} })],
      gateway: restGateway,
      guard: createSecurityGuard(),
      sources: { file: {}, env: { GOV_SUPER_PASSWORD: PASSWORD, GOV_SHUTDOWN_GRACE: "1s", GOV_NAMESPACE_SYSTEM: system, ...target.env } },
      logger: createLogger("test", "silent"),
    });
    urls = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
    root = await login("root", PASSWORD);
    for (const n of [dev, prod]) expect((await rest("PUT", `/v1/namespaces/${seg(n)}`, root)).body).toBe(true);
    expect((await rest("PUT", "/v1/roles/dev-reader", root, { desc: "reads {dev}", resourceActionBind: [{ namespace: dev, action: "r" }] })).body).toBe(true);
    expect((await rest("POST", "/v1/users/alice", root, { password: "alice-password" })).body).toBe(true);
    expect((await rest("PATCH", "/v1/users/alice/role", root, ["dev-reader"])).body).toBe(true);
    alice = await login("alice", "alice-password");
  });
  afterAll(async () => proc?.shutdown());

  it("GET /v1/namespaces lists only what the caller may read; an admin sees all; no token is 401", async () => {
    expect(await rest("GET", "/v1/namespaces", alice)).toEqual({ status: 200, body: [dev] });
    expect((await rest("GET", "/v1/namespaces", root)).body).toEqual(expect.arrayContaining([system, dev, prod]));
    expect((await rest("GET", "/v1/namespaces")).status).toBe(401);
    for (const transport of [
      createConnectTransport({ baseUrl: urls.url, httpVersion: "1.1", interceptors: [bearer(alice)] }),
      createGrpcTransport({ baseUrl: urls.grpcUrl!, interceptors: [bearer(alice)] }),
    ]) {
      expect((await createClient(NamespaceService, transport).listNamespaces({})).namespaces).toEqual([dev]);
    }
  });

  it("the stat's namespace count is what the caller may read, as GET /v1/namespaces lists it; an admin counts all", async () => {
    const stat = async (token: string) => (await rest("GET", `/v1/namespaces/${seg(dev)}/stat`, token)).body as { namespaces: number };
    const all = (await rest("GET", "/v1/namespaces", root)).body as string[];
    await expect.poll(async () => (await stat(root)).namespaces, { timeout: 10_000, interval: 50 }).toBe(all.length); // once a pass has counted
    expect(all.length).toBeGreaterThan(1);
    expect((await stat(alice)).namespaces).toBe(((await rest("GET", "/v1/namespaces", alice)).body as string[]).length);
    expect((await stat(alice)).namespaces).toBe(1);
    const grpc = createClient(StatsService, createGrpcTransport({ baseUrl: urls.grpcUrl!, interceptors: [bearer(alice)] }));
    expect((await grpc.getStat({ namespace: dev })).namespaces).toBe(1);
  });

  it("topology: a discovery records its edge in another namespace (X-Gov-Consumer-Namespace) only if the caller may read it", async () => {
    const other = ns("other");
    for (const consumer of ["checkout", "cart"]) expect((await rest("PUT", `/v1/namespaces/${seg(other)}/services/${consumer}`, root)).body).toBe(true);
    expect((await rest("PUT", `/v1/namespaces/${seg(dev)}/services/order/instances`, root, { schema: "http", host: "10.0.0.1", port: 80 })).body).toBe(true);
    const discover = (token: string, consumer: string) =>
      fetch(`${urls.url}/v1/namespaces/${seg(dev)}/services/order/instances`, { headers: { authorization: `Bearer ${token}`, "x-gov-consumer": consumer, "x-gov-consumer-namespace": other } });
    const topology = async () => (await rest("GET", `/v1/namespaces/${seg(other)}/stat/topology`, root)).body;
    // alice reads {dev} but has no right on the other namespace: her discovery is answered, and writes nothing there;
    // root's, made after hers, is recorded (edge writes are not awaited: once root's is there, hers would be too)
    expect((await discover(alice, "checkout")).status).toBe(200);
    expect((await discover(root, "cart")).status).toBe(200);
    await expect.poll(topology, { timeout: 5000, interval: 50 }).toHaveProperty("cart");
    expect(await topology()).toEqual({ cart: [`${dev}.order`] });
  });

  it("create and delete are admin-only; the current namespace is readable by any user and set only with write permission", async () => {
    expect((await rest("PUT", `/v1/namespaces/${seg(ns("alices"))}`, alice)).status).toBe(403);
    expect((await rest("DELETE", `/v1/namespaces/${seg(dev)}`, alice)).status).toBe(403);
    expect((await rest("GET", "/v1/namespaces/current", alice)).status).toBe(200);
    expect((await rest("PUT", `/v1/namespaces/current/${seg(dev)}`, alice)).status).toBe(403); // r only
    expect((await rest("PUT", `/v1/namespaces/current/${seg(dev)}`, root)).body).toBe(true);
    expect((await rest("GET", "/v1/namespaces/current", alice)).body).toBe(dev);
    const grpc = createClient(NamespaceService, createGrpcTransport({ baseUrl: urls.grpcUrl!, interceptors: [bearer(alice)] }));
    const refused = await grpc.createNamespace({ namespace: ns("alices") }).catch((err: unknown) => ConnectError.from(err).code);
    expect(refused).toBe(Code.PermissionDenied);
  });

  it("the audit log says a namespace delete was forced (?force=true), whether it came over REST or Connect", async () => {
    const [plain, forced, viaConnect] = [ns("gone"), ns("forced"), ns("forced-connect")];
    for (const n of [plain, forced, viaConnect]) {
      expect((await rest("PUT", `/v1/namespaces/${seg(n)}`, root)).body).toBe(true);
      if (n !== plain) expect((await fetch(`${urls.url}/v1/namespaces/${seg(n)}/configs/a.yaml`, { method: "PUT", headers: { authorization: `Bearer ${root}` }, body: "a" })).status).toBe(200);
    }
    expect((await rest("DELETE", `/v1/namespaces/${seg(plain)}`, root)).body).toBe(true);
    expect((await rest("DELETE", `/v1/namespaces/${seg(forced)}?force=true`, root)).body).toBe(true);
    const connect = createClient(NamespaceService, createConnectTransport({ baseUrl: urls.url, httpVersion: "1.1", interceptors: [bearer(root)] }));
    await connect.deleteNamespace({ namespace: viaConnect, force: true });
    const deletes = async (n: string) => {
      const { list } = (await rest("GET", `/v1/audit-log?query=${seg(n)}`, root)).body as { list: { action: string; resource: string }[] };
      return list.filter((e) => e.action === "DELETE").map((e) => e.resource);
    };
    expect(await deletes(plain)).toEqual([`/v1/namespaces/${plain}`]);
    expect(await deletes(forced)).toEqual([`/v1/namespaces/${forced}?force=true`]);
    expect(await deletes(viaConnect)).toEqual([`/v1/namespaces/${viaConnect}?force=true`]);
  });
});
