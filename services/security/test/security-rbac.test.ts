import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { ConfigService } from "@gov/api";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { SecurityService } from "@gov/api/gen/gov/security/v1/security_pb";
import { ServerReflection } from "@gov/api/gen/grpc/reflection/v1/reflection_pb";
import { Health, HealthCheckResponse_ServingStatus as Serving } from "@gov/api/gen/health/v1/health_pb";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { readSse } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectRedis, quitQuietly, runScript } from "@gov/redis";
import { readableNamespaces } from "../src/principal.js";
import { REMOVE_ROLE, securityKeys } from "../src/store/redis-security-scripts.js";
import { LOGIN_REFUSED } from "../src/security-core.js";
import { clientsOf, ns, ROOT_PASSWORD, securityTargets, startSecure, type SecureProcess } from "./harness.js";

const seg = encodeURIComponent;
const codeOf = async (call: Promise<unknown>) => {
  try {
    await call;
    return "ok";
  } catch (err) {
    return Code[ConnectError.from(err).code];
  }
};

// REST, Connect and gRPC against one process per store; embedded and standalone Redis (the Cluster runs the store
// contract suite). The clock is the test's, so that tokens and lockouts expire without waiting.
for (const target of securityTargets().filter((t) => t.name !== "redis-cluster")) {
  describe.skipIf(target.skip)(`security on ${target.name}`, () => {
    const clock = { t: Date.now() };
    let p: SecureProcess;
    let root: string;
    beforeAll(async () => {
      p = await startSecure(target, {}, { now: () => clock.t });
      root = (await p.login("root", ROOT_PASSWORD)).accessToken;
    });
    afterAll(() => p?.close());

    const addUser = async (name: string, password = "pass-word-1", roles: string[] = []) => {
      expect((await p.rest("POST", `/v1/users/${seg(name)}`, { token: root, body: { password } })).body).toBe(true);
      if (roles.length) expect((await p.rest("PATCH", `/v1/users/${seg(name)}/role`, { token: root, body: roles })).body).toBe(true);
    };
    const putRole = async (name: string, bindings: { namespace: string; action: string }[]) =>
      expect((await p.rest("PUT", `/v1/roles/${name}`, { token: root, body: { desc: name, resourceActionBind: bindings } })).body).toBe(true);

    it("a login's token works on REST, Connect and gRPC; no token is 401, wrong role 403", async () => {
      const dev = ns("dev");
      expect((await p.rest("PUT", `/v1/namespaces/${seg(dev)}/configs/a.yaml`, { token: root, body: "a: 1" })).body).toBe(true);
      for (const { name, client } of clientsOf(ConfigService, p, root)) {
        expect((await client.getConfig({ namespace: dev, configId: "a.yaml" })).config?.data, name).toBe("a: 1");
      }
      for (const { name, client } of clientsOf(ConfigService, p)) expect(await codeOf(client.getConfig({ namespace: dev, configId: "a.yaml" })), name).toBe("Unauthenticated");
      const noToken = await p.rest("GET", `/v1/namespaces/${seg(dev)}/configs/a.yaml`);
      expect(noToken.status).toBe(401);
      expect(noToken.body).toEqual({ code: "unauthenticated", message: expect.stringContaining("log in") });
      expect(noToken.headers.get("www-authenticate")).toBe("Bearer"); // RFC 9110: a 401 names its scheme

      await addUser("nobody-1");
      const nobody = (await p.login("nobody-1", "pass-word-1")).accessToken;
      const refused = await p.rest("GET", `/v1/namespaces/${seg(dev)}/configs/a.yaml`, { token: nobody });
      expect(refused.status).toBe(403);
      expect(refused.body).toEqual({ code: "permission_denied", message: expect.stringContaining(`no "r" permission on namespace`) });
      expect((await p.rest("GET", "/v1/users", { token: nobody })).status).toBe(403);
      for (const { name, client } of clientsOf(SecurityService, p, nobody)) expect(await codeOf(client.listUsers({})), name).toBe("PermissionDenied");
    });

    it("gRPC health and reflection answer without a token (Kubernetes probes, buf curl) and are not audited by default", async () => {
      const anonymous = createGrpcTransport({ baseUrl: p.grpcUrl });
      expect((await createClient(Health, anonymous).check({ service: "" })).status).toBe(Serving.SERVING);
      async function* listServices() {
        yield { messageRequest: { case: "listServices" as const, value: "" } };
      }
      const listed: string[] = [];
      for await (const res of createClient(ServerReflection, anonymous).serverReflectionInfo(listServices())) {
        if (res.messageResponse.case === "listServicesResponse") listed.push(...res.messageResponse.value.service.map((s) => s.name));
        break;
      }
      expect(listed).toContain("gov.config.v1.ConfigService");
      // An audited write after them: once its entry is in the log, an entry of theirs would be too.
      const marker = ns("probe");
      expect((await p.rest("PUT", `/v1/namespaces/${seg(marker)}/configs/a.yaml`, { token: root, body: "a: 1" })).status).toBe(200);
      const audit = async (query: string) => (await p.rest("GET", `/v1/audit-log?query=${seg(query)}`, { token: root })).body as { total: number };
      await expect.poll(async () => (await audit(marker)).total, { timeout: 10_000 }).toBe(1);
      expect((await audit("grpc.")).total).toBe(0);
    });

    it("expired and refresh-as-access tokens are 401 on REST and Connect; a refresh works and is not an access token", async () => {
      const pair = await p.login("root", ROOT_PASSWORD);
      const asAccess = await p.rest("GET", "/v1/users", { token: pair.refreshToken });
      expect([asAccess.status, asAccess.body.message]).toEqual([401, "a refresh token was sent where the access token is expected: send the accessToken the login answered with"]);
      const refreshed = await p.rest("POST", "/v1/authenticate/root/refresh", { body: { accessToken: pair.accessToken, refreshToken: pair.refreshToken } });
      expect(refreshed.status, refreshed.text).toBe(200);
      expect(Object.keys(refreshed.body).sort()).toEqual(["accessToken", "refreshToken"]);
      const swapped = await p.rest("POST", "/v1/authenticate/root/refresh", { body: { accessToken: pair.refreshToken, refreshToken: pair.accessToken } });
      expect([swapped.status, swapped.body.message]).toEqual([401, "an access token was sent where the refresh token is expected: send the refreshToken the login answered with"]);

      const saved = clock.t;
      clock.t += 16 * 60_000; // past the access token's 15 minutes, within the refresh token's 3 hours
      try {
        const expired = await p.rest("GET", "/v1/users", { token: pair.accessToken });
        expect([expired.status, expired.body.message]).toEqual([401, expect.stringContaining("expired")]);
        for (const { name, client } of clientsOf(SecurityService, p, pair.accessToken)) expect(await codeOf(client.listUsers({})), name).toBe("Unauthenticated");
        // the expired access token is still traded with its refresh token
        const again = await p.rest("POST", "/v1/authenticate/root/refresh", { body: pair });
        expect(again.status, again.text).toBe(200);
        expect((await p.rest("GET", "/v1/users", { token: again.body.accessToken })).status).toBe(200);
        clock.t += 3 * 3_600_000;
        expect((await p.rest("POST", "/v1/authenticate/root/refresh", { body: pair })).status).toBe(401);
      } finally {
        clock.t = saved;
      }
    });

    /** A watch of `configId` over REST (SSE), Connect and gRPC, each collecting the data it was sent and how it ended. */
    function watchEverywhere(token: string, namespace: string, configId: string) {
      const watches: { name: string; data: string[]; ended?: string }[] = [];
      for (const { name, client } of clientsOf(ConfigService, p, token)) {
        const w: (typeof watches)[number] = { name, data: [] };
        watches.push(w);
        void (async () => {
          try {
            for await (const ev of client.watchConfig({ namespace, configId })) if (ev.config) w.data.push(ev.config.data);
            w.ended = "end";
          } catch (err) {
            w.ended = Code[ConnectError.from(err).code];
          }
        })();
      }
      const sse: (typeof watches)[number] = { name: "sse", data: [] };
      watches.push(sse);
      const ac = new AbortController();
      const url = `${p.url}/v1/namespaces/${seg(namespace)}/configs/${seg(configId)}/watch`;
      void readSse(url, ac.signal, (data, event) => {
        const ev = data as { code: string; config?: { data: string } };
        if (event === "error") sse.ended = ev.code;
        else if (ev.config) sse.data.push(ev.config.data);
      }, { authorization: `Bearer ${token}` }).then((s) => s.done.then(() => (sse.ended ??= "end")));
      return { watches, close: () => ac.abort() };
    }

    it("an open watch ends once its user may no longer read: unbound, locked, or the token expired; nothing is sent after", async () => {
      const dev = ns("dev");
      const put = async (data: string, token = root) => expect((await p.rest("PUT", `/v1/namespaces/${seg(dev)}/configs/w.yaml`, { token, body: data })).body).toBe(true);
      await put("v0");
      const role = `watcher-${Date.now()}`;
      await putRole(role, [{ namespace: dev, action: "r" }]);
      const cases: { user: string; revoke: () => Promise<void>; code: string; message?: string }[] = [
        { user: "wendy", revoke: async () => void (await p.rest("PATCH", "/v1/users/wendy/role", { token: root, body: [] })), code: "PermissionDenied" },
        { user: "walt", revoke: async () => void (await p.rest("PUT", "/v1/users/walt/lock", { token: root })), code: "Unauthenticated" },
        { user: "wyatt", revoke: async () => void (await p.rest("DELETE", "/v1/users/wyatt", { token: root })), code: "Unauthenticated" },
      ];
      for (const c of cases) {
        await addUser(c.user, "watch-pass", [role]);
        const { watches, close } = watchEverywhere((await p.login(c.user, "watch-pass")).accessToken, dev, "w.yaml");
        try {
          await expect.poll(() => watches.map((w) => w.data.length > 0), { timeout: 10_000 }).toEqual([true, true, true]); // the current state
          await put(`before-${c.user}`);
          await expect.poll(() => watches.map((w) => w.data.at(-1)), { timeout: 10_000 }).toEqual(watches.map(() => `before-${c.user}`));
          await c.revoke();
          await put(`secret-after-${c.user}`);
          const rest = c.code === "PermissionDenied" ? "permission_denied" : "unauthenticated";
          await expect.poll(() => watches.map((w) => w.ended), { timeout: 10_000 }).toEqual([c.code, c.code, rest]);
          for (const w of watches) expect(w.data, `${c.user} over ${w.name}`).not.toContain(`secret-after-${c.user}`);
        } finally {
          close();
        }
      }
      // expiry: the test's clock moves past the access token's 15 minutes while the watch is open
      await addUser("wilma", "watch-pass", [role]);
      const { watches, close } = watchEverywhere((await p.login("wilma", "watch-pass")).accessToken, dev, "w.yaml");
      const saved = clock.t;
      try {
        await expect.poll(() => watches.map((w) => w.data.length > 0), { timeout: 10_000 }).toEqual([true, true, true]);
        clock.t += 16 * 60_000;
        await put("secret-after-expiry", (await p.login("root", ROOT_PASSWORD)).accessToken);
        await expect.poll(() => watches.map((w) => w.ended), { timeout: 10_000 }).toEqual(["Unauthenticated", "Unauthenticated", "unauthenticated"]);
        for (const w of watches) expect(w.data, `expiry over ${w.name}`).not.toContain("secret-after-expiry");
      } finally {
        clock.t = saved;
        close();
      }
    });

    it("{dev}: r reads configs and instances but writes nothing and reads no {prod}; rw writes; REST, Connect and gRPC alike", async () => {
      const dev = ns("dev");
      const prod = ns("prod");
      for (const n of [dev, prod]) {
        expect((await p.rest("PUT", `/v1/namespaces/${seg(n)}/configs/app.yaml`, { token: root, body: "x: 1" })).body).toBe(true);
        expect((await p.rest("PUT", `/v1/namespaces/${seg(n)}/services/order/instances`, { token: root, body: { schema: "http", host: "h1", port: 80 } })).status).toBe(200);
      }
      const role = `reader-${Date.now()}`;
      await putRole(role, [{ namespace: dev, action: "r" }]);
      await addUser("alice", "alice-pass", [role]);
      const alice = (await p.login("alice", "alice-pass")).accessToken;

      expect((await p.rest("GET", `/v1/namespaces/${seg(dev)}/configs/app.yaml`, { token: alice })).body.data).toBe("x: 1");
      expect((await p.rest("GET", `/v1/namespaces/${seg(dev)}/services/order/instances`, { token: alice })).body).toHaveLength(1);
      expect((await p.rest("PUT", `/v1/namespaces/${seg(dev)}/configs/app.yaml`, { token: alice, body: "x: 2" })).status).toBe(403);
      expect((await p.rest("PUT", `/v1/namespaces/${seg(dev)}/services/order/instances`, { token: alice, body: { schema: "http", host: "h2", port: 80 } })).status).toBe(403);
      expect((await p.rest("GET", `/v1/namespaces/${seg(prod)}/configs/app.yaml`, { token: alice })).status).toBe(403);
      expect((await p.rest("GET", `/v1/namespaces/${seg(prod)}/services/order/instances`, { token: alice })).status).toBe(403);
      // streams too: a watch is a read of its namespace
      expect((await p.rest("GET", `/v1/namespaces/${seg(prod)}/configs/app.yaml/watch`, { token: alice })).status).toBe(403);
      for (const { name, client } of clientsOf(ConfigService, p, alice)) {
        expect(await codeOf((async () => { for await (const _ of client.watchConfig({ namespace: prod, configId: "app.yaml" })) break; })()), name).toBe("PermissionDenied");
      }
      // a namespace without its hash tag is the rule's 400 for her as for an admin, not a 403 no role could lift
      const untagged = await p.rest("GET", "/v1/namespaces/dev/configs", { token: alice });
      expect([untagged.status, untagged.body.code, untagged.body.message]).toEqual([400, "invalid_argument", expect.stringContaining("hash tag")]);
      for (const { name, client } of clientsOf(ConfigService, p, alice)) {
        expect(await codeOf(client.getConfig({ namespace: "dev", configId: "app.yaml" })), name).toBe("InvalidArgument");
      }
      for (const { name, client } of clientsOf(ConfigService, p, alice)) {
        expect((await client.getConfig({ namespace: dev, configId: "app.yaml" })).config?.data, name).toBe("x: 1");
        expect(await codeOf(client.setConfig({ namespace: dev, configId: "app.yaml", data: "x: 3" })), name).toBe("PermissionDenied");
        expect(await codeOf(client.getConfig({ namespace: prod, configId: "app.yaml" })), name).toBe("PermissionDenied");
      }
      for (const { name, client } of clientsOf(RegistryService, p, alice)) {
        expect((await client.listInstances({ namespace: dev, serviceId: "order" })).instances, name).toHaveLength(1);
        expect(await codeOf(client.registerInstance({ namespace: dev, serviceId: "order", schema: "http", host: "h3", port: 80 })), name).toBe("PermissionDenied");
        expect(await codeOf(client.listInstances({ namespace: prod, serviceId: "order" })), name).toBe("PermissionDenied");
      }
      // The namespace list's scoping, as the namespace service calls it with the caller of its handler.
      const principal = { username: "alice", superUser: false, admin: false, grants: new Map([[dev, { r: true, w: false }]]) };
      expect(readableNamespaces(principal, [dev, prod, "gov-{system}"])).toEqual([dev]);
      expect(readableNamespaces(undefined, [dev, prod])).toEqual([dev, prod]);

      // a keepalive (bidi stream over gRPC) registers in the namespace of its first message: a write
      const keepalive = async (token: string, pingFirst = false) => {
        const grpc = clientsOf(RegistryService, p, token).find((c) => c.name === "grpc")!.client;
        const stop = new AbortController();
        async function* requests() {
          if (pingFirst) yield {};
          yield { register: { namespace: dev, serviceId: "kept", schema: "http", host: "k1", port: 80 } };
          await new Promise((r) => stop.signal.addEventListener("abort", r));
        }
        try {
          for await (const res of grpc.keepalive(requests(), { signal: stop.signal })) return res.instanceId;
          return "ended";
        } catch (err) {
          return Code[ConnectError.from(err).code];
        } finally {
          stop.abort();
        }
      };
      expect(await keepalive(alice)).toBe("PermissionDenied");
      // a stream that pings before registering names no namespace yet: the caller's mistake, even for root
      expect(await keepalive(root, true)).toBe("InvalidArgument");
      // a plain call without one gets the namespace rule's own message, as without security
      for (const { name, client } of clientsOf(ConfigService, p, alice)) {
        const err = await client.getConfig({ namespace: "", configId: "a" }).then(() => undefined, (e: unknown) => ConnectError.from(e));
        expect([err?.code, err?.rawMessage], name).toEqual([Code.InvalidArgument, "namespace is required: give a name with a hash tag such as {dev}"]);
      }

      // rw: writes work, on every protocol; the role change applies to the token already issued
      await putRole(role, [{ namespace: dev, action: "rw" }]);
      expect((await p.rest("PUT", `/v1/namespaces/${seg(dev)}/configs/app.yaml`, { token: alice, body: "x: 2" })).body).toBe(true);
      for (const { name, client } of clientsOf(ConfigService, p, alice)) expect((await client.setConfig({ namespace: dev, configId: `${name}.yaml`, data: "y" })).changed, name).toBe(true);
      // registry writes too: the register refused under "r" above now works, on REST and every RPC protocol
      const registered = await p.rest("PUT", `/v1/namespaces/${seg(dev)}/services/order/instances`, { token: alice, body: { schema: "http", host: "h3", port: 80 } });
      expect([registered.status, registered.body]).toEqual([200, true]);
      for (const { name, client } of clientsOf(RegistryService, p, alice)) {
        expect((await client.registerInstance({ namespace: dev, serviceId: "order", schema: "http", host: `h-${name}`, port: 80 })).registered, name).toBe(true);
      }
      expect((await p.rest("PUT", `/v1/namespaces/${seg(prod)}/services/order/instances`, { token: alice, body: { schema: "http", host: "h3", port: 80 } })).status).toBe(403);
      expect((await p.rest("GET", `/v1/namespaces/${seg(prod)}/configs/app.yaml`, { token: alice })).status).toBe(403);
      expect(await keepalive(alice)).toBe("kept@http#k1#80");
      // a later message the authorization refuses (a `register` for a namespace she may not write) ends the stream with
      // that refusal — not cleanly, as if she had closed her side
      const grpc = clientsOf(RegistryService, p, alice).find((c) => c.name === "grpc")!.client;
      let answered = () => {};
      const firstAnswered = new Promise<void>((resolve) => (answered = resolve));
      async function* laterRefused() {
        yield { register: { namespace: dev, serviceId: "kept", schema: "http", host: "k2", port: 80 } };
        await firstAnswered;
        yield { register: { namespace: prod, serviceId: "kept", schema: "http", host: "k2", port: 80 } };
        await new Promise(() => undefined); // her side stays open: only the server can end the stream
      }
      const ended = (async () => {
        for await (const res of grpc.keepalive(laterRefused())) {
          expect(res.instanceId).toBe("kept@http#k2#80");
          answered();
        }
        return "ended cleanly";
      })().catch((err: unknown) => `${Code[ConnectError.from(err).code]}: ${ConnectError.from(err).rawMessage}`);
      expect(await ended).toMatch(/^PermissionDenied: user "alice" has no "w" permission on namespace/);
      // the audit log has each keepalive's outcome as its first message decided it: refused (403), then kept (200) twice
      const keepalives = async () =>
        ((await p.rest("GET", `/v1/audit-log?query=${seg("RegistryService/Keepalive")}&limit=100`, { token: root })).body.list as { operator: string; status: number }[])
          .filter((e) => e.operator === "alice")
          .map((e) => e.status);
      await expect.poll(keepalives, { timeout: 5000 }).toEqual([200, 200, 403]);
    });

    it("lock refuses a login even with the right password until unlock; root cannot be locked or removed", async () => {
      await addUser("bob", "bob-pass");
      expect((await p.rest("PUT", "/v1/users/bob/lock", { token: root })).body).toBe(true);
      const locked = await p.rest("POST", "/v1/authenticate/bob/login", { body: { password: "bob-pass" } });
      expect([locked.status, locked.body.message]).toEqual([401, expect.stringContaining("locked")]);
      // the right password and a wrong one get the same answer while locked: a lock is no password oracle
      expect((await p.rest("POST", "/v1/authenticate/bob/login", { body: { password: "not-bobs" } })).body).toEqual(locked.body);
      expect((await p.rest("GET", "/v1/users", { token: root })).body).toContainEqual({ username: "bob", roles: [], locked: true });
      expect((await p.rest("DELETE", "/v1/users/bob/unlock", { token: root })).body).toBe(true);
      expect((await p.login("bob", "bob-pass")).accessToken).toBeTruthy();

      const lockRoot = await p.rest("PUT", "/v1/users/root/lock", { token: root });
      expect([lockRoot.status, lockRoot.body]).toEqual([412, { code: "failed_precondition", message: 'the super user "root" cannot be locked' }]);
      const removeRoot = await p.rest("DELETE", "/v1/users/root", { token: root });
      expect([removeRoot.status, removeRoot.body.message]).toEqual([412, 'the super user "root" cannot be removed']);
      expect((await p.rest("POST", "/v1/users/bob", { token: root, body: { password: "x-pass" } })).status).toBe(409);
      // names that would show as another in the user list and the audit log are refused when created
      // (zero-width space, C1 CSI, soft hyphen, word joiner, Hangul filler, variation selector, tag character)
      for (const name of [" bob", "bob ", "ali\u202ecb", "root\u200b", "root\u009b", "ro\u00adot", "root\u2060", "root\u3164", "root\ufe0f", "root\u{e0041}"]) {
        const res = await p.rest("POST", `/v1/users/${seg(name)}`, { token: root, body: { password: "x-pass-word" } });
        expect([res.status, res.body.code], JSON.stringify(name)).toEqual([400, "invalid_argument"]);
      }
      const hidden = await p.rest("POST", `/v1/users/${seg("root\u200b")}`, { token: root, body: { password: "x-pass-word" } });
      expect(hidden.body.message).toMatch(/^username contains U\+200B, a character that does not show .*: remove it$/);
      // names in other scripts, accents and emoji show as themselves
      // (emoji made of several code points too: a heart with its variation selector, a family joined by U+200D)
      for (const name of ["r\u00e9sum\u00e9", "\u65e5\u672c", "bob\u{1f600}", "ann\u2764\ufe0f", "fam\u{1f468}\u200d\u{1f469}"]) {
        expect((await p.rest("POST", `/v1/users/${seg(name)}`, { token: root, body: { password: "x-pass-word" } })).status, name).toBe(200);
      }
      for (const role of ["dev\u2066s", "admin\u200b"]) {
        expect((await p.rest("PUT", `/v1/roles/${seg(role)}`, { token: root, body: { desc: "d", resourceActionBind: [] } })).status, role).toBe(400);
      }
      expect((await p.rest("PATCH", "/v1/users/bob/role", { token: root, body: ["no-such-role"] })).status).toBe(404);
      expect((await p.rest("PUT", "/v1/roles/bad", { token: root, body: { resourceActionBind: [{ namespace: "{dev}", action: "x" }] } })).status).toBe(400);
      // an unknown key in a binding names the binding's fields, not the request's
      const typo = await p.rest("PUT", "/v1/roles/bad", { token: root, body: { resourceActionBind: [{ namespace: "{dev}", acton: "r" }] } });
      expect([typo.status, typo.body.message]).toEqual([400, expect.stringMatching(/key "acton" is unknown: ResourceAction has namespace, action$/)]);
      const twice = await p.rest("PUT", "/v1/roles/bad", { token: root, body: { resourceActionBind: [{ namespace: "{dev}", action: "r" }, { namespace: "{dev}", action: "w" }] } });
      expect([twice.status, twice.body.message]).toEqual([400, expect.stringContaining("bound twice")]);
    });

    it("10 bad passwords lock for 15 minutes; unknown users get the same answer as wrong passwords", async () => {
      await addUser("carol", "carol-pass");
      const wrong = async (user: string) => p.rest("POST", `/v1/authenticate/${user}/login`, { body: { password: "nope-nope" } });
      const unknown = await wrong("no-such-user-x");
      const bad = await wrong("carol");
      expect([unknown.status, unknown.body]).toEqual([bad.status, bad.body]);
      expect(bad.body).toEqual({ code: "unauthenticated", message: LOGIN_REFUSED });
      for (let i = 1; i < 10; i++) await wrong("carol");
      const right = await p.rest("POST", "/v1/authenticate/carol/login", { body: { password: "carol-pass" } });
      expect([right.status, right.body]).toEqual([401, bad.body]); // locked: refused like any failed login
      const saved = clock.t;
      clock.t += 15 * 60_000 + 1000;
      try {
        expect((await p.login("carol", "carol-pass")).accessToken).toBeTruthy();
      } finally {
        clock.t = saved;
      }
      // The same scrypt work either way: medians of a few logins are of the same order. The two are timed in turn, so
      // that load from other work on a busy machine (which comes and goes over hundreds of ms) weighs on both alike.
      const timed = async (user: string) => {
        const t0 = performance.now();
        await wrong(user);
        return performance.now() - t0;
      };
      const median = (ts: number[]) => ts.sort((a, b) => a - b)[2];
      await addUser("dave", "dave-pass");
      const knownTs: number[] = [];
      const absentTs: number[] = [];
      for (let i = 0; i < 5; i++) {
        knownTs.push(await timed("dave"));
        absentTs.push(await timed("no-such-user-y"));
      }
      const [known, absent] = [median(knownTs), median(absentTs)];
      expect(absent / known).toBeGreaterThan(0.4);
      expect(absent / known).toBeLessThan(2.5);
    });

    it("attempts sent at once cannot pass the lock, and a password change's old password counts toward it", async () => {
      await addUser("fay", "fay-pass-word");
      const attempt = (password: string) => p.rest("POST", "/v1/authenticate/fay/login", { body: { password } });
      // 31 wrong passwords and the right one, all at once: at most 10 are checked, so the right one (last) is refused
      const answers = await Promise.all([...Array.from({ length: 31 }, (_, i) => attempt(`wrong-${i}`)), attempt("fay-pass-word")]);
      expect(answers.map((a) => a.status)).toEqual(Array(32).fill(401));
      expect((await attempt("fay-pass-word")).status).toBe(401); // locked
      const fay = (await p.rest("GET", "/v1/users", { token: root })).body.find((u: { username: string }) => u.username === "fay");
      expect(fay).toMatchObject({ locked: true });

      // a stolen access token is no way around the lock: the old password of a password change is an attempt too
      await addUser("gil", "gil-pass-word");
      const token = (await p.login("gil", "gil-pass-word")).accessToken;
      for (let i = 0; i < 10; i++) {
        const res = await p.rest("PATCH", "/v1/users/gil/password", { token, body: { oldPassword: `guess-${i}`, newPassword: "new-pass-word" } });
        expect(res.status).toBe(403);
      }
      const right = await p.rest("PATCH", "/v1/users/gil/password", { token, body: { oldPassword: "gil-pass-word", newPassword: "new-pass-word" } });
      // locked: its sessions end too (the token is refused), and so does its login with the right password
      expect([right.status, right.body.message]).toEqual([401, 'user "gil" is locked: ask an administrator to unlock it']);
      expect((await p.rest("POST", "/v1/authenticate/gil/login", { body: { password: "gil-pass-word" } })).status).toBe(401);
    });

    it("deleted and locked users cannot refresh; a role change takes effect on refresh", async () => {
      await addUser("erin", "erin-pass");
      const pair = await p.login("erin", "erin-pass");
      const dev = ns("dev");
      const role = `writer-${Date.now()}`;
      await putRole(role, [{ namespace: dev, action: "rw" }]);
      expect((await p.rest("PATCH", "/v1/users/erin/role", { token: root, body: [role] })).body).toBe(true);
      const after = await p.rest("POST", "/v1/authenticate/erin/refresh", { body: pair });
      expect((await p.rest("PUT", `/v1/namespaces/${seg(dev)}/configs/c`, { token: after.body.accessToken, body: "c" })).body).toBe(true);

      expect((await p.rest("PUT", "/v1/users/erin/lock", { token: root })).body).toBe(true);
      expect((await p.rest("POST", "/v1/authenticate/erin/refresh", { body: after.body })).status).toBe(401);
      expect((await p.rest("GET", `/v1/namespaces/${seg(dev)}/configs/c`, { token: after.body.accessToken })).status).toBe(401); // at once, not in 15 min
      expect((await p.rest("DELETE", "/v1/users/erin/unlock", { token: root })).body).toBe(true);
      expect((await p.rest("DELETE", "/v1/users/erin", { token: root })).body).toBe(true);
      const gone = await p.rest("POST", "/v1/authenticate/erin/refresh", { body: after.body });
      expect([gone.status, gone.body.message]).toEqual([401, expect.stringContaining("no longer exists")]);
    });

    it("a password change ends the sessions issued before it (access and refresh), in the same second too", async () => {
      await addUser("jack", "jack-pass");
      const old = await p.login("jack", "jack-pass");
      expect((await p.rest("PATCH", "/v1/users/jack/password", { token: old.accessToken, body: { oldPassword: "jack-pass", newPassword: "jack-pass-2" } })).status).toBe(200);
      // The test's clock stands still: the change and the tokens are of the same second (a script that logs in and
      // then rotates the password), which a time cut-off in whole seconds let through.
      const refused = await p.rest("PATCH", "/v1/users/jack/password", { token: old.accessToken, body: { oldPassword: "jack-pass-2", newPassword: "x-x-x-x" } });
      expect([refused.status, refused.body.message]).toEqual([401, expect.stringContaining("session has ended")]);
      expect((await p.rest("POST", "/v1/authenticate/jack/refresh", { body: old })).status).toBe(401);
      const second = await p.login("jack", "jack-pass-2");
      expect((await p.rest("PATCH", "/v1/users/jack/password", { token: root, body: { newPassword: "jack-pass-3" } })).body).toBe(true);
      expect((await p.rest("GET", "/v1/users", { token: second.accessToken })).status).toBe(401); // an admin's reset ends it too
      expect((await p.rest("POST", "/v1/authenticate/jack/refresh", { body: second })).status).toBe(401);
      const fresh = await p.login("jack", "jack-pass-3");
      const renewed = await p.rest("POST", "/v1/authenticate/jack/refresh", { body: fresh });
      expect(renewed.status).toBe(200);
      // the refreshed pair is of the same session: it works, and refreshes again
      expect((await p.rest("POST", "/v1/authenticate/jack/refresh", { body: renewed.body })).status).toBe(200);
    });

    it("a user removed and created again under the same name: the old tokens stay refused, whatever the new user may do", async () => {
      await addUser("kim", "kim-pass-1");
      const old = await p.login("kim", "kim-pass-1");
      expect((await p.rest("DELETE", "/v1/users/kim", { token: root })).body).toBe(true);
      await addUser("kim", "a-new-admin-pw", ["admin"]);
      const users = await p.rest("GET", "/v1/users", { token: old.accessToken });
      expect([users.status, users.body.message]).toEqual([401, expect.stringContaining("session has ended")]);
      for (const { name, client } of clientsOf(SecurityService, p, old.accessToken)) expect(await codeOf(client.listUsers({})), name).toBe("Unauthenticated");
      expect((await p.rest("POST", "/v1/authenticate/kim/refresh", { body: old })).status).toBe(401);
      // the new user's own login works
      expect((await p.rest("GET", "/v1/users", { token: (await p.login("kim", "a-new-admin-pw")).accessToken })).status).toBe(200);
    });

    it.skipIf(!target.url)("a role whose removal was cut short: saving it is 412 and says to remove it again; removing it finishes", async () => {
      await putRole("half", [{ namespace: ns("half"), action: "rw" }]);
      await addUser("lea", "lea-pass-1", ["half"]);
      const keys = securityKeys(p.system);
      const raw = await connectRedis(target.url!);
      try {
        await runScript(raw, REMOVE_ROLE, [keys.roles, keys.rolesRemoving], [keys.channel, "half"]); // its first step only
      } finally {
        await quitQuietly(raw);
      }
      const refused = await p.rest("PUT", "/v1/roles/half", { token: root, body: { desc: "again", resourceActionBind: [] } });
      expect([refused.status, refused.body]).toEqual([412, { code: "failed_precondition", message: expect.stringContaining("remove it again (DELETE /v1/roles/half)") }]);
      expect((await p.rest("DELETE", "/v1/roles/half", { token: root })).body).toBe(true);
      await putRole("half", [{ namespace: ns("half"), action: "rw" }]);
      expect((await p.rest("GET", "/v1/users", { token: root })).body).toContainEqual(expect.objectContaining({ username: "lea", roles: [] }));
    });

    it("everyone may change their own password (old one required), not another's; an admin may reset any", async () => {
      await addUser("frank", "frank-pass");
      await addUser("gina", "gina-pass", ["admin"]);
      const frank = (await p.login("frank", "frank-pass")).accessToken;
      const gina = (await p.login("gina", "gina-pass")).accessToken;
      expect((await p.rest("PATCH", "/v1/users/frank/password", { token: frank, body: { oldPassword: "bad", newPassword: "frank-2" } })).status).toBe(403);
      // a missing old password is a malformed request (400), not a wrong one
      const missing = await p.rest("PATCH", "/v1/users/frank/password", { token: frank, body: { newPassword: "frank-2" } });
      expect([missing.status, missing.body.code, missing.body.message]).toEqual([400, "invalid_argument", expect.stringContaining("oldPassword is missing")]);
      expect((await p.rest("PATCH", "/v1/users/frank/password", { token: frank, body: { oldPassword: "frank-pass", newPassword: "frank-2" } })).body).toBe(true);
      // the change ended frank's session, the one that made it included: he logs in again
      const frank2 = (await p.login("frank", "frank-2")).accessToken;
      expect((await p.rest("PATCH", "/v1/users/gina/password", { token: frank2, body: { oldPassword: "gina-pass", newPassword: "x-x-x" } })).status).toBe(403);
      expect((await p.rest("PATCH", "/v1/users/frank/password", { token: gina, body: { newPassword: "frank-3" } })).body).toBe(true);
      expect((await p.login("frank", "frank-3")).accessToken).toBeTruthy();
      expect((await p.rest("GET", "/v1/users", { token: gina })).status).toBe(200); // admin role: users, roles, audit
      const admin = await p.rest("DELETE", "/v1/roles/admin", { token: root });
      expect([admin.status, admin.body.message]).toEqual([400, expect.stringContaining("reserved administrator role")]);
      const adminBindings = await p.rest("GET", "/v1/roles/admin/bind", { token: root }); // not "does not exist": it does
      expect([adminBindings.status, adminBindings.body.message]).toEqual([400, expect.stringContaining("reserved administrator role: it has no bindings of its own")]);
      // but not the super user's password: that would hand an admin the account that cannot be locked or removed
      const takeover = await p.rest("PATCH", "/v1/users/root/password", { token: gina, body: { newPassword: "hijacked-root" } });
      expect([takeover.status, takeover.body.message]).toEqual([403, expect.stringContaining("only the super user")]);
      expect((await p.rest("POST", "/v1/authenticate/root/login", { body: { password: "hijacked-root" } })).status).toBe(401);
    });
  });
}

// The split shape: a config service on its own checks the tokens the security service (another process) issued,
// against the users, roles and JWT key they share in Redis.
for (const target of securityTargets().filter((t) => t.name === "redis")) {
  describe.skipIf(target.skip)("a service without the security module, on the shared Redis", () => {
    let security: SecureProcess;
    let config: Awaited<ReturnType<typeof startConfigOnly>>;
    const startConfigOnly = async (system: string) => {
      const { buildProcess, createLogger } = await import("@gov/service-kit");
      const { createConfigModule } = await import("@gov/config-service");
      const { createSecurityGuard } = await import("../src/module.js");
      const proc = await buildProcess({
        name: "test-config-only",
        modules: [createConfigModule()],
        guard: createSecurityGuard(),
        sources: { file: {}, env: { REDIS_URL: target.url!, GOV_NAMESPACE_SYSTEM: system, GOV_CONFIG_SERVICE_PORT: "0", GOV_CONFIG_SERVICE_GRPC_PORT: "0", GOV_SHUTDOWN_GRACE: "2s" } },
        logger: createLogger("test", "silent"),
      });
      const urls = await proc.listen({ managementPort: 0, host: "127.0.0.1" });
      return { proc, url: urls.url, grpcUrl: urls.grpcUrl! };
    };
    beforeAll(async () => {
      security = await startSecure(target, { REDIS_URL: target.url! });
      config = await startConfigOnly(security.system);
    });
    afterAll(async () => {
      await config?.proc.shutdown();
      await security?.close();
    });

    it("accepts the security service's tokens, refuses what RBAC refuses, and follows a lock at once", async () => {
      const root = (await security.login("root", ROOT_PASSWORD)).accessToken;
      const dev = ns("dev");
      expect((await security.rest("PUT", `/v1/roles/split`, { token: root, body: { resourceActionBind: [{ namespace: dev, action: "r" }] } })).body).toBe(true);
      expect((await security.rest("POST", "/v1/users/ivy", { token: root, body: { password: "ivy-pass" } })).body).toBe(true);
      expect((await security.rest("PATCH", "/v1/users/ivy/role", { token: root, body: ["split"] })).body).toBe(true);
      const ivy = (await security.login("ivy", "ivy-pass")).accessToken;
      const [rootClient] = clientsOf(ConfigService, config, root);
      expect((await rootClient.client.setConfig({ namespace: dev, configId: "a", data: "a" })).changed).toBe(true);
      for (const { name, client } of clientsOf(ConfigService, config, ivy)) {
        expect((await client.getConfig({ namespace: dev, configId: "a" })).config?.data, name).toBe("a");
        expect(await codeOf(client.setConfig({ namespace: dev, configId: "a", data: "b" })), name).toBe("PermissionDenied");
      }
      for (const { name, client } of clientsOf(ConfigService, config)) expect(await codeOf(client.getConfig({ namespace: dev, configId: "a" })), name).toBe("Unauthenticated");
      expect((await security.rest("PUT", "/v1/users/ivy/lock", { token: root })).body).toBe(true);
      // the lock reaches the other process through the change feed
      await expect
        .poll(async () => codeOf(clientsOf(ConfigService, config, ivy)[0].client.getConfig({ namespace: dev, configId: "a" })), { timeout: 5000, interval: 50 })
        .toBe("Unauthenticated");
    });
  });
}
