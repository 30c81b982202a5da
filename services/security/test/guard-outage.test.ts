// The guard itself meets a store outage (its user cache was dropped by a change-feed interruption, as in a Redis
// failover, and the user must be read again): the call is answered 503 `unavailable` like a handler's outage, on REST
// and over Connect — never a bare "internal error" 500.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ConfigService } from "@gov/api";
import { storeOutage } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemorySecurityStore } from "../src/store/memory-security-store.js";
import type { SecurityChange, SecurityStore } from "../src/store/security-store.js";
import { bearer, ns, ROOT_PASSWORD, startSecure, type SecureProcess } from "./harness.js";

describe("the guard during a store outage", () => {
  const state = storeOutage();
  const listeners: ((change: SecurityChange) => void)[] = [];
  const memory = createMemorySecurityStore();
  // the memory store, with reads of users failing while `down`, and its change listeners within reach
  const store: SecurityStore = {
    ...memory,
    getUser: state.failing(memory.getUser.bind(memory)),
    onChange: (listener) => {
      listeners.push(listener);
      return memory.onChange(listener);
    },
  };
  let p: SecureProcess;
  beforeAll(async () => {
    p = await startSecure({ name: "embedded" }, {}, { securityStore: store });
  });
  afterAll(() => p?.close());

  it("answers 503 unavailable when the caller's user cannot be read, and serves again once it can", async () => {
    const { accessToken } = await p.login("root", ROOT_PASSWORD);
    const path = `/v1/namespaces/${encodeURIComponent(ns("outage"))}/configs`;
    expect((await p.rest("GET", path, { token: accessToken })).status).toBe(200);
    state.down = true;
    for (const listener of listeners) listener({ kind: "all", trusted: true }); // the change feed was interrupted
    const rest = await p.rest("GET", path, { token: accessToken });
    expect([rest.status, rest.body?.code, rest.body?.message]).toEqual([503, "unavailable", "Redis at 127.0.0.1:1 is unavailable (test): retry when it is back"]);
    // a write refused before its handler ran wrote nothing, and says so (a retry cannot apply it twice)
    const write = await p.rest("PUT", `${path}/a.yaml`, { token: accessToken, body: "a: 1" });
    expect([write.status, write.body?.message]).toEqual([503, "Redis at 127.0.0.1:1 is unavailable (test): nothing was written; retry when it is back"]);
    const client = createClient(ConfigService, createConnectTransport({ baseUrl: p.url, httpVersion: "1.1", interceptors: [bearer(accessToken)] }));
    await expect(client.listConfigs({ namespace: ns("outage") })).rejects.toMatchObject({ code: 14 }); // unavailable
    await expect(client.setConfig({ namespace: ns("outage"), configId: "a.yaml", data: "a: 1" })).rejects.toMatchObject({ code: 14, rawMessage: expect.stringContaining("nothing was written") });
    state.down = false;
    expect((await p.rest("GET", path, { token: accessToken })).status).toBe(200);
    // the audit log records what the clients were answered (the REST PUT and the Connect SetConfig), 503, not an internal error
    const audit = await p.rest("GET", `/v1/audit-log?query=${encodeURIComponent("/a.yaml")}&limit=10`, { token: accessToken });
    expect((audit.body as { list: { action: string; status: number }[] }).list.filter((e) => e.action === "PUT").map((e) => e.status)).toEqual([503, 503]);
  });

  it("the management listener still knows an admin's token while users cannot be read (health details, for the operator)", async () => {
    const { accessToken } = await p.login("root", ROOT_PASSWORD);
    const health = async (token?: string) =>
      (await p.proc.management.inject({ url: "/actuator/health", headers: token ? { authorization: `Bearer ${token}` } : {} })).json().components.machineId;
    expect(await health(accessToken)).toHaveProperty("details"); // read from the store: root is known from now on
    state.down = true;
    for (const listener of listeners) listener({ kind: "all", trusted: false }); // the change feed is interrupted
    try {
      expect(await health(accessToken)).toHaveProperty("details");
      expect(await health()).toEqual({ status: expect.any(String) }); // anonymous: no details
      expect(await health(`${accessToken.slice(0, -4)}AAAA`)).toEqual({ status: expect.any(String) }); // a forged signature
    } finally {
      state.down = false;
      for (const listener of listeners) listener({ kind: "all", trusted: true });
    }
  });
});
