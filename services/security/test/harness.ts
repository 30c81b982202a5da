import { afterAll, beforeAll } from "vitest";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";
import { createConfigModule, createMemoryConfigStore, createRedisConfigStore } from "@gov/config-service";
import { restGateway } from "@gov/gateway";
import { connectRedis, requireReplicas } from "@gov/redis";
import { createMemoryRegistryStore, createRedisRegistryStore, createRegistryModule } from "@gov/registry-service";
import { buildProcess, createLogger, type BuiltProcess, type Logger } from "@gov/service-kit";
import { redisTargets } from "@gov/testkit";
import { createSecurityGuard, createSecurityModule } from "../src/module.js";
import { createMemorySecurityStore } from "../src/store/memory-security-store.js";
import { createRedisSecurityStore } from "../src/store/redis-security-store.js";
import type { SecurityStore } from "../src/store/security-store.js";

export const ROOT_PASSWORD = "root-password-for-tests";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

let seq = 0;
/** A fresh system namespace per process, so suites sharing one Redis never see each other's users. */
export const systemNs = () => `gov-{sys${process.pid}x${Date.now().toString(36)}x${seq++}}`;
export const ns = (label = "") => `${label}{sc${process.pid}x${Date.now().toString(36)}x${seq++}}`;

/** Embedded, Redis and Redis Cluster: each opens the three stores of one process. */
export function securityTargets() {
  return [
    { name: "embedded", skip: "", url: undefined as string | undefined },
    ...redisTargets().map((t) => ({ name: t.name, skip: t.skip, url: t.url as string | undefined })),
  ];
}

/** `waitForReplica`: writes take the durable path of gov.redis.min-replicas=1 (WAIT 1 1ms: answers 0 without replicas). */
export async function openSecurityStoreOn(url: string | undefined, namespace: string, kind = "redis", waitForReplica = false): Promise<SecurityStore> {
  if (!url) return createMemorySecurityStore();
  const client = await connectRedis(url);
  if (waitForReplica) await requireReplicas(client, { minReplicas: 1, timeoutMs: 1 });
  return createRedisSecurityStore(client, { namespace, kind: kind as "redis" });
}

export interface SecureProcess {
  proc: BuiltProcess;
  /** Its system namespace (users, roles, audit log, JWT key). */
  system: string;
  url: string;
  grpcUrl: string;
  /** REST call with an optional bearer token; JSON body unless a string/Buffer. */
  rest(method: string, path: string, opts?: { token?: string; body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; body: any; text: string; headers: Headers }>;
  login(username: string, password: string): Promise<{ accessToken: string; refreshToken: string }>;
  close(): Promise<void>;
}

/** Config, registry and security modules with the guard on, as `npm start` runs them, listening on free ports. */
export async function startSecure(
  target: { name: string; url?: string },
  env: Record<string, string> = {},
  // listenAsConfigured: the REST listener on its PORT and HOST settings (as `npm start` listens), not on any free port
  options: { now?: () => number; announce?: (text: string) => void; securityStore?: SecurityStore; listenAsConfigured?: boolean; logger?: Logger } = {},
): Promise<SecureProcess> {
  const system = env.GOV_NAMESPACE_SYSTEM ?? systemNs();
  const security = options.securityStore ?? (await openSecurityStoreOn(target.url, system, target.name));
  const config = target.url ? createRedisConfigStore(await connectRedis(target.url), { maxVersions: 10, kind: target.name as "redis" }) : createMemoryConfigStore({ maxVersions: 10 });
  const registry = target.url ? await createRedisRegistryStore(await connectRedis(target.url), { kind: target.name as "redis" }) : createMemoryRegistryStore();
  const proc = await buildProcess({
    name: "test-security",
    modules: [createConfigModule({ store: await config }), createRegistryModule({ store: registry }), createSecurityModule({ store: security, now: options.now, announce: options.announce ?? (() => {}) })],
    gateway: restGateway,
    guard: createSecurityGuard({ now: options.now }),
    // GOV_SUPER_PASSWORD: "" leaves it unset (a generated one)
    sources: { file: {}, env: { GOV_SUPER_PASSWORD: ROOT_PASSWORD, GOV_SHUTDOWN_GRACE: "2s", GOV_NAMESPACE_SYSTEM: system, ...env } },
    logger: options.logger ?? logger,
  });
  const urls = await proc.listen(options.listenAsConfigured ? { grpcPort: 0, managementPort: 0 } : { port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
  const rest: SecureProcess["rest"] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | Uint8Array | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === "string" || Buffer.isBuffer(opts.body) ? opts.body : JSON.stringify(opts.body);
      headers["content-type"] ??= typeof opts.body === "string" ? "text/plain" : "application/json";
    }
    const res = await fetch(`${urls.url}${path}`, { method, headers, body: body as BodyInit | undefined });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed, text, headers: res.headers };
  };
  return {
    proc,
    system,
    url: urls.url,
    grpcUrl: urls.grpcUrl!,
    rest,
    async login(username, password) {
      const res = await rest("POST", `/v1/authenticate/${encodeURIComponent(username)}/login`, { body: { password } });
      if (res.status !== 200) throw new Error(`login of ${username} failed: ${res.status} ${res.text}`);
      return res.body;
    },
    close: () => proc.shutdown(),
  };
}

/**
 * For a `describe` block whose tests share one embedded secure process and the super user's token: starts it before
 * the block, stops it after; read `p` and `root` inside the tests.
 */
export function sharedRootSession(): { readonly p: SecureProcess; readonly root: string } {
  const session = { p: undefined as unknown as SecureProcess, root: "" };
  beforeAll(async () => {
    session.p = await startSecure({ name: "embedded" });
    session.root = (await session.p.login("root", ROOT_PASSWORD)).accessToken;
  });
  afterAll(() => session.p?.close());
  return session;
}

/** A bearer token on every call of a Connect client. */
export const bearer =
  (token: string): Interceptor =>
  (next) =>
  (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };

/** Connect (HTTP/1.1) and gRPC (h2c) clients of `service`, carrying `token`. */
export function clientsOf<S extends DescService>(service: S, p: { url: string; grpcUrl: string }, token?: string): { name: string; client: Client<S> }[] {
  const interceptors = token ? [bearer(token)] : [];
  return [
    { name: "connect", client: createClient(service, createConnectTransport({ baseUrl: p.url, httpVersion: "1.1", interceptors })) },
    { name: "grpc", client: createClient(service, createGrpcTransport({ baseUrl: p.grpcUrl, interceptors })) },
  ];
}
