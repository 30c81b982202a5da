import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";
import { ConfigService } from "@gov/api";
import { SecurityService } from "@gov/api/gen/gov/security/v1/security_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOGIN_REFUSED } from "../src/security-core.js";
import { bearer, ns, ROOT_PASSWORD, securityTargets, startSecure, type SecureProcess } from "./harness.js";

// Issue #9 (Security) through the RPC protocols rather than REST: Login, Refresh, lockout, lock/unlock, role changes
// and the role bodies, over Connect (HTTP/1.1) and gRPC (h2c), plus gRPC-Web; on the embedded store and standalone
// Redis (the Cluster runs the store contract suite). REST is used only to compare its answers with the RPCs'.

/** gov.security.login.max-failures for this file's process: small, so that a lockout costs few scrypt checks. */
const MAX_FAILURES = 3;
const seg = encodeURIComponent;

type Protocol = "connect" | "grpc" | "grpc-web";
const RPC: Protocol[] = ["connect", "grpc"];

/** How a call ended: "ok", or its Connect code's name and the server's message (without the "[code]" prefix). */
const outcome = async (call: Promise<unknown>): Promise<"ok" | { code: string; message: string }> => {
  try {
    await call;
    return "ok";
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: Code[e.code], message: e.rawMessage };
  }
};
const codeOf = async (call: Promise<unknown>) => {
  const o = await outcome(call);
  return o === "ok" ? o : o.code;
};

for (const target of securityTargets().filter((t) => t.name !== "redis-cluster")) {
  describe.skipIf(target.skip)(`security over Connect, gRPC and gRPC-Web on ${target.name}`, () => {
    let p: SecureProcess;
    let root: string;
    beforeAll(async () => {
      p = await startSecure(target, { GOV_SECURITY_LOGIN_MAX_FAILURES: String(MAX_FAILURES) });
      root = (await p.login("root", ROOT_PASSWORD)).accessToken;
    });
    afterAll(() => p?.close());

    const transport = (protocol: Protocol, token?: string): Transport => {
      const interceptors = token ? [bearer(token)] : [];
      if (protocol === "grpc") return createGrpcTransport({ baseUrl: p.grpcUrl, interceptors });
      if (protocol === "grpc-web") return createGrpcWebTransport({ baseUrl: p.url, httpVersion: "1.1", interceptors });
      return createConnectTransport({ baseUrl: p.url, httpVersion: "1.1", interceptors });
    };
    const client = <S extends DescService>(service: S, protocol: Protocol, token?: string): Client<S> => createClient(service, transport(protocol, token));
    const security = (protocol: Protocol, token?: string) => client(SecurityService, protocol, token);
    const config = (protocol: Protocol, token?: string) => client(ConfigService, protocol, token);

    // Setup through the admin's Connect client (the behaviour under test is then exercised on each protocol).
    const admin = () => security("connect", root);
    const addUser = async (username: string, password: string, roles: string[] = []) => {
      expect((await admin().addUser({ username, password })).added).toBe(true);
      if (roles.length) expect((await admin().bindRoles({ username, roleNames: roles })).bound).toBe(true);
    };
    const putRole = async (roleName: string, bindings: { namespace: string; action: string }[], desc = roleName) =>
      expect((await admin().putRole({ roleName, desc, resourceActionBind: bindings })).saved).toBe(true);
    const lockedOf = async (protocol: Protocol, username: string) => (await security(protocol, root).listUsers({})).users.find((u) => u.username === username)?.locked;

    it("Login and Refresh over Connect and gRPC answer tokens that work on the config service over Connect and gRPC; a refresh token is no access token", async () => {
      const dev = ns("dev");
      expect((await config("connect", root).setConfig({ namespace: dev, configId: "a.yaml", data: "a: 1" })).changed).toBe(true);
      const role = `login-reader-${Date.now()}`;
      await putRole(role, [{ namespace: dev, action: "r" }]);
      await addUser("lina", "lina-pass-word", [role]);

      for (const via of RPC) {
        const pair = await security(via).login({ username: "lina", password: "lina-pass-word" });
        expect(pair.accessToken.split("."), via).toHaveLength(3);
        expect(pair.refreshToken.split("."), via).toHaveLength(3);
        expect(pair.refreshToken, via).not.toBe(pair.accessToken);
        for (const on of RPC) {
          expect((await config(on, pair.accessToken).getConfig({ namespace: dev, configId: "a.yaml" })).config?.data, `${via} token on ${on}`).toBe("a: 1");
          expect((await config(on, pair.accessToken).listConfigs({ namespace: dev })).configIds, `${via} token on ${on}`).toEqual(["a.yaml"]);
          // without a token, the same call is refused
          expect(await outcome(config(on).getConfig({ namespace: dev, configId: "a.yaml" })), on).toEqual({ code: "Unauthenticated", message: expect.stringContaining("log in") });
          // the refresh token sent as the access token
          expect(await outcome(config(on, pair.refreshToken).getConfig({ namespace: dev, configId: "a.yaml" })), `${via} refresh token on ${on}`).toEqual({
            code: "Unauthenticated",
            message: "a refresh token was sent where the access token is expected: send the accessToken the login answered with",
          });
        }

        const refreshed = await security(via).refresh({ username: "lina", accessToken: pair.accessToken, refreshToken: pair.refreshToken });
        expect(refreshed.accessToken.split("."), via).toHaveLength(3);
        expect(refreshed.accessToken, via).not.toBe(pair.accessToken);
        expect(refreshed.refreshToken, via).not.toBe(pair.refreshToken);
        for (const on of RPC) expect((await config(on, refreshed.accessToken).getConfig({ namespace: dev, configId: "a.yaml" })).config?.data, `${via} refreshed on ${on}`).toBe("a: 1");
        // the new refresh token is no access token either
        expect(await codeOf(config(via, refreshed.refreshToken).listConfigs({ namespace: dev })), via).toBe("Unauthenticated");
        // and a swapped pair is refused by Refresh
        expect(await outcome(security(via).refresh({ username: "lina", accessToken: pair.refreshToken, refreshToken: pair.accessToken })), via).toEqual({
          code: "Unauthenticated",
          message: "an access token was sent where the refresh token is expected: send the refreshToken the login answered with",
        });
      }
    });

    it(`${MAX_FAILURES} wrong passwords over Connect or gRPC lock the user: the right one is then refused as REST refuses it; unknown users get the same answer`, async () => {
      for (const via of RPC) {
        const user = `carol-${via}`;
        await addUser(user, "carol-pass-word");
        const login = (username: string, password: string) => outcome(security(via).login({ username, password }));
        const refused = { code: "Unauthenticated", message: LOGIN_REFUSED };

        const unknown = await login(`no-such-user-${via}`, "nope-nope");
        const wrong = await login(user, "nope-nope");
        expect(wrong, via).toEqual(refused);
        expect(unknown, via).toEqual(wrong);
        // one short of the limit does not lock, and the right password starts the count again
        for (let i = 2; i < MAX_FAILURES; i++) expect(await login(user, `nope-${i}`), via).toEqual(refused);
        expect(await lockedOf(via, user), via).toBe(false);
        expect(await login(user, "carol-pass-word"), via).toBe("ok");

        for (let i = 0; i < MAX_FAILURES; i++) expect(await login(user, `wrong-${i}`), via).toEqual(refused);
        expect(await lockedOf(via, user), via).toBe(true);
        // locked: the right password gets exactly the wrong one's answer
        expect(await login(user, "carol-pass-word"), via).toEqual(refused);
        // the same shape as the REST path's answer for it (401, {code: "unauthenticated", message})
        const rest = await p.rest("POST", `/v1/authenticate/${seg(user)}/login`, { body: { password: "carol-pass-word" } });
        expect([rest.status, rest.body], via).toEqual([401, { code: "unauthenticated", message: refused.message }]);

        // an admin's unlock over the same protocol lets the right password in again
        expect((await security(via, root).unlockUser({ username: user })).unlocked, via).toBe(true);
        expect(await login(user, "carol-pass-word"), via).toBe("ok");
      }
    });

    it("LockUser and UnlockUser over Connect and gRPC: a locked user can neither log in nor refresh nor use its token; root cannot be locked or removed", async () => {
      const dev = ns("dev");
      expect((await config("connect", root).setConfig({ namespace: dev, configId: "b.yaml", data: "b" })).changed).toBe(true);
      const role = `lock-reader-${Date.now()}`;
      await putRole(role, [{ namespace: dev, action: "r" }]);
      for (const via of RPC) {
        const user = `bob-${via}`;
        await addUser(user, "bob-pass-word", [role]);
        const pair = await security(via).login({ username: user, password: "bob-pass-word" });
        expect((await config(via, pair.accessToken).getConfig({ namespace: dev, configId: "b.yaml" })).config?.data, via).toBe("b");

        expect((await security(via, root).lockUser({ username: user })).locked, via).toBe(true);
        expect(await lockedOf(via, user), via).toBe(true);
        expect(await outcome(security(via).login({ username: user, password: "bob-pass-word" })), via).toEqual({ code: "Unauthenticated", message: LOGIN_REFUSED });
        expect(await outcome(security(via).refresh({ username: user, accessToken: pair.accessToken, refreshToken: pair.refreshToken })), via).toEqual({
          code: "Unauthenticated",
          message: `user "${user}" is locked: ask an administrator to unlock it`,
        });
        // the token issued before the lock stops working at once, on every protocol
        for (const on of RPC) expect(await codeOf(config(on, pair.accessToken).getConfig({ namespace: dev, configId: "b.yaml" })), `${via} lock, call on ${on}`).toBe("Unauthenticated");

        expect((await security(via, root).unlockUser({ username: user })).unlocked, via).toBe(true);
        expect(await lockedOf(via, user), via).toBe(false);
        const again = await security(via).login({ username: user, password: "bob-pass-word" });
        expect((await config(via, again.accessToken).getConfig({ namespace: dev, configId: "b.yaml" })).config?.data, via).toBe("b");

        // the super user
        expect(await outcome(security(via, root).lockUser({ username: "root" })), via).toEqual({ code: "FailedPrecondition", message: 'the super user "root" cannot be locked' });
        expect(await outcome(security(via, root).removeUser({ username: "root" })), via).toEqual({ code: "FailedPrecondition", message: 'the super user "root" cannot be removed' });
        expect(await lockedOf(via, "root"), via).toBe(false);
        expect((await security(via).login({ username: "root", password: ROOT_PASSWORD })).accessToken, via).toBeTruthy();
      }
    });

    it("a role change takes effect on Refresh over Connect and gRPC: {dev}: r cannot write, rw after a refresh can", async () => {
      const dev = ns("dev");
      const reader = `rr-${Date.now()}`;
      const writer = `rw-${Date.now()}`;
      await putRole(reader, [{ namespace: dev, action: "r" }]);
      await putRole(writer, [{ namespace: dev, action: "rw" }]);
      for (const via of RPC) {
        const user = `erin-${via}`;
        const configId = `c-${via}.yaml`;
        expect((await config("connect", root).setConfig({ namespace: dev, configId, data: "c0" })).changed, via).toBe(true);
        await addUser(user, "erin-pass-word", [reader]);
        const pair = await security(via).login({ username: user, password: "erin-pass-word" });
        expect((await config(via, pair.accessToken).getConfig({ namespace: dev, configId })).config?.data, via).toBe("c0");
        expect(await outcome(config(via, pair.accessToken).setConfig({ namespace: dev, configId, data: `by-${via}` })), via).toEqual({
          code: "PermissionDenied",
          message: expect.stringContaining(`no "w" permission on namespace`),
        });

        expect((await security(via, root).bindRoles({ username: user, roleNames: [writer] })).bound, via).toBe(true);
        const refreshed = await security(via).refresh({ username: user, accessToken: pair.accessToken, refreshToken: pair.refreshToken });
        expect((await config(via, refreshed.accessToken).setConfig({ namespace: dev, configId, data: `by-${via}` })).changed, via).toBe(true);
        expect((await config("connect", root).getConfig({ namespace: dev, configId })).config?.data, via).toBe(`by-${via}`);
      }
    });

    it("gRPC-Web with security on: no token is unauthenticated; {dev}: r reads but cannot write; root writes", async () => {
      const dev = ns("dev");
      const web = (token?: string) => config("grpc-web", token);
      const role = `web-reader-${Date.now()}`;
      await putRole(role, [{ namespace: dev, action: "r" }]);
      await addUser("wes", "wes-pass-word", [role]);

      // root, over gRPC-Web: logs in and writes
      const rootPair = await security("grpc-web").login({ username: "root", password: ROOT_PASSWORD });
      expect((await web(rootPair.accessToken).setConfig({ namespace: dev, configId: "w.yaml", data: "w: 1" })).changed).toBe(true);
      expect((await web(root).setConfig({ namespace: dev, configId: "w.yaml", data: "w: 2" })).changed).toBe(true);

      expect(await outcome(web().getConfig({ namespace: dev, configId: "w.yaml" }))).toEqual({ code: "Unauthenticated", message: expect.stringContaining("log in") });
      expect(await codeOf(web().setConfig({ namespace: dev, configId: "w.yaml", data: "anon" }))).toBe("Unauthenticated");
      expect(await codeOf(security("grpc-web").listUsers({}))).toBe("Unauthenticated");

      const wes = (await security("grpc-web").login({ username: "wes", password: "wes-pass-word" })).accessToken;
      expect((await web(wes).getConfig({ namespace: dev, configId: "w.yaml" })).config?.data).toBe("w: 2");
      expect((await web(wes).listConfigs({ namespace: dev })).configIds).toEqual(["w.yaml"]);
      expect(await outcome(web(wes).setConfig({ namespace: dev, configId: "w.yaml", data: "by-wes" }))).toEqual({
        code: "PermissionDenied",
        message: expect.stringContaining(`no "w" permission on namespace`),
      });
      expect(await codeOf(web(wes).getConfig({ namespace: ns("prod"), configId: "w.yaml" }))).toBe("PermissionDenied");
      expect(await codeOf(security("grpc-web", wes).listUsers({}))).toBe("PermissionDenied");
      // nothing of the refused write landed
      expect((await web(root).getConfig({ namespace: dev, configId: "w.yaml" })).config?.data).toBe("w: 2");
    });

    it("a role with two bindings: GET /v1/roles is [{name, desc}] and GET /v1/roles/{role}/bind is [{namespace, action}]; ListRoles and GetRoleBindings agree over Connect and gRPC", async () => {
      const dev = ns("dev");
      const test = ns("test");
      const role = `developer-${Date.now()}`;
      const put = await p.rest("PUT", `/v1/roles/${seg(role)}`, { token: root, body: { desc: "developers", resourceActionBind: [{ namespace: dev, action: "r" }, { namespace: test, action: "rw" }] } });
      expect([put.status, put.body]).toEqual([200, true]);

      const roles = await p.rest("GET", "/v1/roles", { token: root });
      expect(roles.status, roles.text).toBe(200);
      expect(Array.isArray(roles.body), roles.text).toBe(true);
      expect(roles.body).toContainEqual({ name: role, desc: "developers" });
      for (const r of roles.body as object[]) expect(Object.keys(r).sort(), JSON.stringify(r)).toEqual(["desc", "name"]);

      const bind = await p.rest("GET", `/v1/roles/${seg(role)}/bind`, { token: root });
      expect([bind.status, bind.body], bind.text).toEqual([
        200,
        [
          { namespace: dev, action: "r" },
          { namespace: test, action: "rw" },
        ],
      ]);
      const missing = await p.rest("GET", `/v1/roles/${seg(`${role}-missing`)}/bind`, { token: root });
      expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);

      for (const via of RPC) {
        const listed = (await security(via, root).listRoles({})).roles.map((r) => ({ name: r.name, desc: r.desc }));
        expect(listed, via).toEqual(roles.body);
        const bindings = (await security(via, root).getRoleBindings({ roleName: role })).bindings.map((b) => ({ namespace: b.namespace, action: b.action }));
        expect(bindings, via).toEqual(bind.body);
        expect(await codeOf(security(via, root).getRoleBindings({ roleName: `${role}-missing` })), via).toBe("NotFound");
        expect(await codeOf(security(via).listRoles({})), via).toBe("Unauthenticated");
      }
      // a role saved over RPC reads back the same on REST
      const viaRpc = `${role}-rpc`;
      expect((await security("grpc", root).putRole({ roleName: viaRpc, desc: "from grpc", resourceActionBind: [{ namespace: test, action: "w" }] })).saved).toBe(true);
      expect((await p.rest("GET", `/v1/roles/${seg(viaRpc)}/bind`, { token: root })).body).toEqual([{ namespace: test, action: "w" }]);
      expect((await p.rest("GET", "/v1/roles", { token: root })).body).toContainEqual({ name: viaRpc, desc: "from grpc" });
    });
  });
}
