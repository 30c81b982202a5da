import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ConfigService } from "@gov/api";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { connectRedis } from "@gov/redis";
import { pauseProcesses, resumeProcesses, startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createRedisSecurityStore } from "../src/store/redis-security-store.js";
import { bearer, ns, ROOT_PASSWORD, startSecure, systemNs, type SecureProcess } from "./harness.js";

/**
 * Fail closed (contract §7, issue #9): no call is answered successfully unless its audit entry is stored. The store that
 * holds the audit log (the system namespace's) is a private Redis, paused (SIGSTOP: connections stay open, commands
 * time out on the client, as on a frozen Cluster node), while the config writes go to the shared one, which stays up —
 * the split of a Cluster whose audit node failed. Before this, a write whose entry could not be stored was answered
 * 200 after a 1 s wait, its entry only in the process's memory, lost by a SIGKILL.
 *
 * The cases run in order on one process: (a) puts the writer in its failing state, (b) relies on it, (c) ends it.
 */
const COMMAND_TIMEOUT_MS = 1000;
const seg = encodeURIComponent;

describe.skipIf(inject("redisSkipReason"))("the audit log fails closed when its store cannot be written", () => {
  let auditRedis: RedisServer;
  let p: SecureProcess;
  let token: string;
  const n = ns("failclosed");
  const config = (id: string) => `/v1/namespaces/${seg(n)}/configs/${id}`;
  const read = async (id: string) => {
    const res = await p.rest("GET", config(id), { token }); // a read: not audited under the default selection (write)
    return res.status === 200 ? (res.body as { data: string }).data : res.status;
  };
  beforeAll(async () => {
    auditRedis = await startRedis();
    const system = systemNs();
    const securityStore = await createRedisSecurityStore(await connectRedis(auditRedis.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS }), { namespace: system });
    p = await startSecure({ name: "redis", url: inject("redisUrl") }, { GOV_NAMESPACE_SYSTEM: system }, { securityStore });
    token = (await p.login("root", ROOT_PASSWORD)).accessToken;
    // a first audited write on a healthy store: the principal is cached, so the pause below does not touch authorization
    expect((await p.rest("PUT", config("warm.yaml"), { token, body: "w: 1" })).status).toBe(200);
  });
  afterAll(async () => {
    if (auditRedis?.pid) resumeProcesses([auditRedis.pid]);
    await p?.close();
    await auditRedis?.stop();
  });

  it("(a) a write whose handler succeeded while the store refused its entry is answered 503, saying it was applied (the change is there); a failed call quotes its error", async () => {
    const resume = pauseProcesses([auditRedis.pid!]);
    try {
      // with it, before the store is known to fail, a call whose handler fails: its own error is quoted, and a retry is the remedy
      const client = createClient(ConfigService, createConnectTransport({ baseUrl: p.url, httpVersion: "1.1", interceptors: [bearer(token)] }));
      const [res, failed] = await Promise.all([
        p.rest("PUT", config("a.yaml"), { token, body: "a: 1" }),
        client.setConfig({ namespace: n, configId: "", data: "x" }).then(() => "answered", (err: unknown) => ConnectError.from(err)),
      ]);
      expect(failed).toMatchObject({ code: Code.Unavailable, rawMessage: expect.stringMatching(/^the audit log could not record this call \(Redis at .*\), which failed anyway \(.+\): retry when the store is back$/) });
      expect(res.status).toBe(503);
      expect(res.body.code).toBe("unavailable");
      expect(res.body.message).toMatch(
        /^the change WAS applied, but the audit log could not record it \(Redis at 127\.0\.0\.1:\d+ is unavailable \(Command timed out\)\): this process keeps the entry and writes it once the store is back\. Do not assume the change failed: read it back before sending it again$/,
      );
      expect(await read("a.yaml")).toBe("a: 1"); // applied, as the answer says
    } finally {
      resume();
    }
  });

  it("(b) once the store is known to fail, a write is refused before its handler runs: nothing is applied", async () => {
    const resume = pauseProcesses([auditRedis.pid!]);
    try {
      const res = await p.rest("PUT", config("b.yaml"), { token, body: "b: 1" });
      expect([res.status, res.body.code]).toEqual([503, "unavailable"]);
      expect(res.body.message).toMatch(/^the audit log cannot be written \(Redis at 127\.0\.0\.1:\d+ is unavailable \(Command timed out\)\): nothing was done; retry when the store is back$/);
      // the same over Connect
      const client = createClient(ConfigService, createConnectTransport({ baseUrl: p.url, httpVersion: "1.1", interceptors: [bearer(token)] }));
      await expect(client.setConfig({ namespace: n, configId: "b2.yaml", data: "b: 2" })).rejects.toMatchObject({ code: 14, rawMessage: expect.stringContaining("nothing was done") });
      expect(await read("b.yaml")).toBe(404);
      expect(await read("b2.yaml")).toBe(404);
    } finally {
      resume();
    }
  });

  it("(b2) a keepalive (a write stream, audited under `write`) whose entry cannot be stored is refused before it starts: 503, nothing registered", async () => {
    // A stream's entry is written whole before the stream starts (its first message, which names the resource, comes
    // later), so a stream is never half-audited: refused while its handler has not run yet.
    const resume = pauseProcesses([auditRedis.pid!]);
    try {
      const grpc = createClient(RegistryService, createGrpcTransport({ baseUrl: p.grpcUrl, interceptors: [bearer(token)] }));
      const stop = new AbortController();
      async function* requests() {
        yield { register: { namespace: n, serviceId: "kept", schema: "http", host: "k1", port: 80 } };
        await new Promise((r) => stop.signal.addEventListener("abort", r));
      }
      let outcome: unknown;
      try {
        for await (const res of grpc.keepalive(requests(), { signal: stop.signal })) {
          outcome = res.instanceId;
          break;
        }
      } catch (err) {
        outcome = err;
      } finally {
        stop.abort();
      }
      expect(outcome).toBeInstanceOf(ConnectError);
      expect(Code[(outcome as ConnectError).code]).toBe("Unavailable");
      expect((outcome as ConnectError).rawMessage).toMatch(/^the audit log could not record this call \(Redis at .*\): the stream was not started; retry when the store is back$/);
      expect((await p.rest("GET", `/v1/namespaces/${seg(n)}/services/kept/instances`, { token })).body).toEqual([]);
    } finally {
      resume();
    }
  });

  it("(b3) a query of the log meanwhile answers 503 in a few seconds: it does not wait for the entries kept to be written", async () => {
    const resume = pauseProcesses([auditRedis.pid!]);
    try {
      for (const q of ["?limit=5", "?limit=5&query=b.yaml"]) {
        const started = performance.now();
        const res = await p.rest("GET", `/v1/audit-log${q}`, { token });
        expect([q, res.status, res.body.code]).toEqual([q, 503, "unavailable"]);
        expect(performance.now() - started).toBeLessThan(5_000);
      }
    } finally {
      resume();
    }
  });

  it("(c) with the store back, the next audited call succeeds and clears the failing state; the entries kept meanwhile reach the log", async () => {
    const res = await p.rest("PUT", config("c.yaml"), { token, body: "c: 1" });
    expect([res.status, res.body]).toEqual([200, true]);
    expect(await read("c.yaml")).toBe("c: 1");
    // the log has every write, each with the answer its client got: (a)'s kept entry and (b)'s refusals included
    const audit = await p.rest("GET", `/v1/audit-log?query=${seg(`/v1/namespaces/${n}/configs/`)}&limit=100`, { token });
    const list = (audit.body as { list: { resource: string; status: number; msg: string }[] }).list;
    const statusOf = (id: string) => new Set(list.filter((e) => e.resource.endsWith(`/${id}`)).map((e) => e.status));
    expect(statusOf("c.yaml")).toEqual(new Set([200]));
    expect(statusOf("b.yaml")).toEqual(new Set([503]));
    expect(statusOf("b2.yaml")).toEqual(new Set([503]));
    // (a)'s entry, kept and written once the store was back: the answer it got (503, "applied"), or the handler's
    // outcome (200) from a write of it already under way when the answer left (a paused Redis runs what it was sent
    // once it resumes; which of the two gets there depends on when the pause ended)
    const a = list.filter((e) => e.resource.endsWith("/a.yaml"));
    expect(a.length).toBeGreaterThan(0);
    for (const e of a) expect(e.status === 200 ? e.msg : e.msg.slice(0, 24)).toBe(e.status === 200 ? "" : "the change WAS applied, ");
  });

  it("(d) back on a healthy store, a call pays no round trip before its handler again: the change is applied while its entry's write is pending", async () => {
    // The store paused for less than the client's command timeout: the entry's open is sent and waits for Redis, the
    // handler runs meanwhile (its config write goes to the other Redis), and the answer waits for the open.
    const resume = pauseProcesses([auditRedis.pid!]);
    let answered = false;
    let put: Promise<{ status: number }> | undefined;
    try {
      put = p.rest("PUT", config("d.yaml"), { token, body: "d: 1" }).finally(() => (answered = true));
      await expect.poll(() => read("d.yaml"), { timeout: COMMAND_TIMEOUT_MS / 2, interval: 20 }).toBe("d: 1");
      expect(answered).toBe(false); // the answer waits for its entry
    } finally {
      resume();
    }
    expect((await put).status).toBe(200);
  });
});

describe.skipIf(inject("redisSkipReason"))("a write whose outcome is unknown while the audit log cannot be written either", () => {
  let redis: RedisServer;
  let p: SecureProcess;
  beforeAll(async () => {
    redis = await startRedis();
    const system = systemNs();
    const securityStore = await createRedisSecurityStore(await connectRedis(redis.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS }), { namespace: system });
    // the config store on the same Redis (its command timeout 3 s): both stop answering at once
    p = await startSecure({ name: "redis", url: redis.url }, { GOV_NAMESPACE_SYSTEM: system }, { securityStore });
  });
  afterAll(async () => {
    if (redis?.pid) resumeProcesses([redis.pid]);
    await p?.close();
    await redis?.stop();
  });

  it("keeps its 504 (it may have been applied), not a 503 that says it failed anyway", async () => {
    const token = (await p.login("root", ROOT_PASSWORD)).accessToken;
    const path = `/v1/namespaces/${seg(ns("unknown"))}/configs/u.yaml`;
    expect((await p.rest("PUT", path, { token, body: "u: 0" })).status).toBe(200); // the principal is cached
    const resume = pauseProcesses([redis.pid!]);
    try {
      const res = await p.rest("PUT", path, { token, body: "u: 1" });
      expect([res.status, res.body.code]).toEqual([504, "deadline_exceeded"]);
      expect(res.body.message).not.toMatch(/failed anyway/);
    } finally {
      resume();
    }
  });
});
