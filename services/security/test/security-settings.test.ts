import { connectRedis, quitQuietly } from "@gov/redis";
import { decodeJwt, jwtVerify } from "jose";
import { afterEach, describe, expect, it } from "vitest";
import { LOGIN_REFUSED } from "../src/security-core.js";
import { createMemorySecurityStore } from "../src/store/memory-security-store.js";
import { securityKeys } from "../src/store/redis-security-scripts.js";
import { ROOT_PASSWORD, securityTargets, startSecure, systemNs, type SecureProcess } from "./harness.js";

// The security settings that `npm start` only ever runs at their defaults, each proved over REST with a value of its
// own: the JWT secrets, the token lifetimes, the lockout, and the CSV export's formula guard. Real clocks throughout:
// lifetimes and the lock are set short and waited for with expect.poll.

const seg = encodeURIComponent;
const SECRET_A = "sec-jwt-secret-A-0123456789abcdefghijklmnopqrstuv"; // ≥ 32 characters, as the setting demands
const SECRET_B = "sec-jwt-secret-B-0123456789abcdefghijklmnopqrstuv";
const GOV_KEY = "gov-security-key-0123456789abcdefghijklmnopqrstuv";
const keyOf = (secret: string) => new TextEncoder().encode(secret);
/** The token verifies (signature, HS256, expiry) with `secret`, as a client holding it would check it. */
const verifiesWith = async (token: string, secret: string) => jwtVerify(token, keyOf(secret), { algorithms: ["HS256"] }).then(
  () => true,
  () => false,
);

const targets = securityTargets().filter((t) => t.name !== "redis-cluster");
const embedded = targets.find((t) => t.name === "embedded")!;
const redis = targets.find((t) => t.name === "redis")!;

const started: SecureProcess[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.close()));
});
async function start(target: { name: string; url?: string }, env: Record<string, string>, options: Parameters<typeof startSecure>[2] = {}) {
  const p = await startSecure(target, env, options);
  started.push(p);
  return p;
}

/** What the store keeps under the generated-key name (redis-security-scripts' `jwtKey`), read with a client of our own. */
async function storedJwtKey(url: string, system: string): Promise<string | null> {
  const raw = await connectRedis(url);
  try {
    return await raw.get(securityKeys(system).jwtKey);
  } finally {
    await quitQuietly(raw);
  }
}

describe("sec.jwt.secret and gov.security.key", () => {
  it("embedded: a process with sec.jwt.secret signs with exactly it (HS256) and keeps no generated key", async () => {
    const store = createMemorySecurityStore();
    const p = await start(embedded, { SEC_JWT_SECRET: SECRET_A }, { securityStore: store });
    const pair = await p.login("root", ROOT_PASSWORD);
    const { payload, protectedHeader } = await jwtVerify(pair.accessToken, keyOf(SECRET_A), { algorithms: ["HS256"] });
    expect([protectedHeader.alg, payload.sub, payload.use]).toEqual(["HS256", "root", "access"]);
    expect(await verifiesWith(pair.refreshToken, SECRET_A)).toBe(true);
    expect(await verifiesWith(pair.accessToken, SECRET_B)).toBe(false);
    expect((await p.rest("GET", "/v1/users", { token: pair.accessToken })).status).toBe(200);
    // no key was kept in the system namespace: the store hands back the candidate it is offered, as when it has none
    expect(await store.jwtKey("probe-candidate")).toBe("probe-candidate");
  });

  describe.skipIf(redis.skip)("on Redis", () => {
    it("sec.jwt.secret: signs with it, stores no key; a second process with it accepts the tokens, one with another secret refuses them", async () => {
      const system = systemNs();
      const a = await start(redis, { GOV_NAMESPACE_SYSTEM: system, SEC_JWT_SECRET: SECRET_A });
      const pair = await a.login("root", ROOT_PASSWORD);
      const { payload, protectedHeader } = await jwtVerify(pair.accessToken, keyOf(SECRET_A), { algorithms: ["HS256"] });
      expect([protectedHeader.alg, payload.sub, payload.use]).toEqual(["HS256", "root", "access"]);
      expect(await verifiesWith(pair.refreshToken, SECRET_A)).toBe(true);
      expect(await storedJwtKey(redis.url!, system)).toBeNull();

      const b = await start(redis, { GOV_NAMESPACE_SYSTEM: system, SEC_JWT_SECRET: SECRET_A });
      const onB = await b.rest("GET", "/v1/users", { token: pair.accessToken });
      expect([onB.status, onB.body.map((u: { username: string }) => u.username)]).toEqual([200, ["root"]]);
      const refreshedOnB = await b.rest("POST", "/v1/authenticate/root/refresh", { body: pair });
      expect(refreshedOnB.status, refreshedOnB.text).toBe(200);
      expect(await verifiesWith(refreshedOnB.body.accessToken, SECRET_A)).toBe(true);

      const c = await start(redis, { GOV_NAMESPACE_SYSTEM: system, SEC_JWT_SECRET: SECRET_B });
      const onC = await c.rest("GET", "/v1/users", { token: pair.accessToken });
      expect([onC.status, onC.body.code]).toEqual([401, "unauthenticated"]);
      expect((await c.rest("POST", "/v1/authenticate/root/refresh", { body: pair })).status).toBe(401);
      // and the other way round: c's own tokens (signed with SECRET_B) work on c only
      const cPair = await c.login("root", ROOT_PASSWORD);
      expect(await verifiesWith(cPair.accessToken, SECRET_B)).toBe(true);
      expect((await c.rest("GET", "/v1/users", { token: cPair.accessToken })).status).toBe(200);
      expect((await a.rest("GET", "/v1/users", { token: cPair.accessToken })).status).toBe(401);
      // three processes with a secret on one system namespace, and still no generated key in it
      expect(await storedJwtKey(redis.url!, system)).toBeNull();
    });

    it("without a secret (the control): a key is generated and kept in the system namespace, and tokens are signed with it", async () => {
      const system = systemNs();
      const p = await start(redis, { GOV_NAMESPACE_SYSTEM: system });
      const key = await storedJwtKey(redis.url!, system);
      expect(key).toEqual(expect.any(String));
      expect(key!.length).toBeGreaterThanOrEqual(32);
      const pair = await p.login("root", ROOT_PASSWORD);
      expect(await verifiesWith(pair.accessToken, key!)).toBe(true);
    });
  });

  it("gov.security.key signs when sec.jwt.secret is absent; sec.jwt.secret wins when both are set", async () => {
    const keyOnly = await start(embedded, { GOV_SECURITY_KEY: GOV_KEY });
    const k = await keyOnly.login("root", ROOT_PASSWORD);
    expect(await verifiesWith(k.accessToken, GOV_KEY)).toBe(true);
    expect(await verifiesWith(k.refreshToken, GOV_KEY)).toBe(true);
    expect((await keyOnly.rest("GET", "/v1/users", { token: k.accessToken })).status).toBe(200);

    const both = await start(embedded, { GOV_SECURITY_KEY: GOV_KEY, SEC_JWT_SECRET: SECRET_A });
    const b = await both.login("root", ROOT_PASSWORD);
    expect(await verifiesWith(b.accessToken, SECRET_A)).toBe(true);
    expect(await verifiesWith(b.accessToken, GOV_KEY)).toBe(false);
    expect((await both.rest("GET", "/v1/users", { token: b.accessToken })).status).toBe(200);
    // the gov.security.key-only process's token is foreign to the process where sec.jwt.secret won
    expect((await both.rest("GET", "/v1/users", { token: k.accessToken })).status).toBe(401);
  });
});

describe("sec.jwt.token-validity", () => {
  const POLL = { timeout: 10_000, interval: 200 };

  it("access (2s): exp - iat is 2 s; the token works at once and is refused (401, expired) once it has expired", async () => {
    const p = await start(embedded, { SEC_JWT_TOKEN_VALIDITY_ACCESS: "2s" });
    const pair = await p.login("root", ROOT_PASSWORD);
    const access = decodeJwt(pair.accessToken);
    expect(access.exp! - access.iat!).toBe(2);
    const refresh = decodeJwt(pair.refreshToken);
    expect(refresh.exp! - refresh.iat!).toBe(3 * 3600); // the refresh lifetime keeps its default
    expect((await p.rest("GET", "/v1/users", { token: pair.accessToken })).status).toBe(200);
    await expect.poll(async () => (await p.rest("GET", "/v1/users", { token: pair.accessToken })).status, POLL).toBe(401);
    const expired = await p.rest("GET", "/v1/users", { token: pair.accessToken });
    expect(expired.body).toEqual({ code: "unauthenticated", message: expect.stringContaining("expired") });
    expect(Date.now()).toBeGreaterThanOrEqual(access.exp! * 1000); // not refused before its exp
  });

  it("an access validity longer than the refresh validity stops startup naming both, as given and where from", async () => {
    await expect(start(embedded, { SEC_JWT_TOKEN_VALIDITY_ACCESS: "4h", SEC_JWT_TOKEN_VALIDITY_REFRESH: "3h" })).rejects.toThrow(
      'setting sec.jwt.token-validity.access, "4h" (from environment variable SEC_JWT_TOKEN_VALIDITY_ACCESS), is longer than sec.jwt.token-validity.refresh, "3h" (from environment variable SEC_JWT_TOKEN_VALIDITY_REFRESH): an access token would outlive the refresh token',
    );
    await expect(start(embedded, { SEC_JWT_TOKEN_VALIDITY_ACCESS: "4H" })).rejects.toThrow('"4H" (from environment variable SEC_JWT_TOKEN_VALIDITY_ACCESS), is longer than sec.jwt.token-validity.refresh, 3h (the default)');
  });

  it("a lock duration of 0 (no lockout at all, silently) is refused at startup", async () => {
    await expect(start(embedded, { GOV_SECURITY_LOGIN_LOCK_DURATION: "0s" })).rejects.toThrow(/gov\.security\.login\.lock-duration.*"0s" is out of range: use a duration at least 1s/);
  });

  it("refresh (4s): exp - iat is 4 s; the refresh works (also past the access token's 1 s) and is refused once it has expired", async () => {
    const p = await start(embedded, { SEC_JWT_TOKEN_VALIDITY_ACCESS: "1s", SEC_JWT_TOKEN_VALIDITY_REFRESH: "4s" });
    const pair = await p.login("root", ROOT_PASSWORD);
    const [access, refresh] = [decodeJwt(pair.accessToken), decodeJwt(pair.refreshToken)];
    expect([access.exp! - access.iat!, refresh.exp! - refresh.iat!]).toEqual([1, 4]);
    const first = await p.rest("POST", "/v1/authenticate/root/refresh", { body: pair });
    expect(first.status, first.text).toBe(200);
    const again = [decodeJwt(first.body.accessToken), decodeJwt(first.body.refreshToken)];
    expect(again.map((t) => t.exp! - t.iat!)).toEqual([1, 4]); // a refreshed pair has the same lifetimes
    // the access token expires first; its pair is still traded while the refresh token lives
    await expect.poll(async () => (await p.rest("GET", "/v1/users", { token: pair.accessToken })).status, POLL).toBe(401);
    const traded = await p.rest("POST", "/v1/authenticate/root/refresh", { body: pair });
    expect(traded.status, traded.text).toBe(200);
    await expect.poll(async () => (await p.rest("POST", "/v1/authenticate/root/refresh", { body: pair })).status, POLL).toBe(401);
    const refused = await p.rest("POST", "/v1/authenticate/root/refresh", { body: pair });
    expect(refused.body).toEqual({ code: "unauthenticated", message: expect.stringContaining("refresh token has expired") });
    expect(Date.now()).toBeGreaterThanOrEqual(refresh.exp! * 1000);
  });
});

for (const target of targets) {
  describe.skipIf(target.skip)(`gov.security.login on ${target.name}`, () => {
    it("max-failures=3, lock-duration=2s: 3 wrong passwords lock; the right one is refused while locked and accepted once the lock has passed", async () => {
      const p = await start(target, { GOV_SECURITY_LOGIN_MAX_FAILURES: "3", GOV_SECURITY_LOGIN_LOCK_DURATION: "2s" });
      const root = (await p.login("root", ROOT_PASSWORD)).accessToken;
      expect((await p.rest("POST", "/v1/users/lou", { token: root, body: { password: "lou-right-pass" } })).body).toBe(true);
      const attempt = (password: string) => p.rest("POST", "/v1/authenticate/lou/login", { body: { password } });
      const lockedOf = async () => (await p.rest("GET", "/v1/users", { token: root })).body.find((u: { username: string }) => u.username === "lou")?.locked;

      for (let i = 1; i <= 2; i++) expect((await attempt(`wrong-${i}`)).body).toEqual({ code: "unauthenticated", message: LOGIN_REFUSED });
      expect(await lockedOf()).toBe(false); // 2 failures: not yet
      const lockSent = Date.now();
      const third = await attempt("wrong-3");
      expect([third.status, third.body]).toEqual([401, { code: "unauthenticated", message: LOGIN_REFUSED }]);
      expect(await lockedOf()).toBe(true); // the third locks (the default 10 would not have)
      const whileLocked = await attempt("lou-right-pass");
      expect([whileLocked.status, whileLocked.body]).toEqual([401, { code: "unauthenticated", message: LOGIN_REFUSED }]);

      // the right password, tried until it is accepted: attempts on a locked user are not counted, so this cannot lock
      // it again; it must be accepted after 2 s (not the default 15 min), and not before
      await expect.poll(async () => (await attempt("lou-right-pass")).status, { timeout: 10_000, interval: 250 }).toBe(200);
      expect(Date.now() - lockSent).toBeGreaterThanOrEqual(2000);
      expect(await lockedOf()).toBe(false);
      const pair = await p.login("lou", "lou-right-pass");
      // its token is accepted: a user without roles is known (403 on an admin call), not refused as unauthenticated
      const asLou = await p.rest("GET", "/v1/users", { token: pair.accessToken });
      expect([asLou.status, asLou.body.code]).toEqual([403, "permission_denied"]);
    });
  });
}

/** RFC 4180 rows of a CSV whose cells are all quoted (anything else fails the test, naming where). */
function parseQuotedCsv(text: string): string[][] {
  const rows: string[][] = [];
  let i = 0;
  while (i < text.length) {
    const row: string[] = [];
    for (;;) {
      if (text[i] !== '"') throw new Error(`unquoted cell at ${i}: ${JSON.stringify(text.slice(i, i + 40))}`);
      let cell = "";
      for (i++; ; ) {
        if (i >= text.length) throw new Error("unterminated quoted cell");
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            cell += '"';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        cell += text[i++];
      }
      row.push(cell);
      if (text[i] === ",") {
        i++;
        continue;
      }
      if (text.startsWith("\r\n", i)) {
        i += 2;
        break;
      }
      throw new Error(`expected , or CRLF at ${i}: ${JSON.stringify(text.slice(i, i + 40))}`);
    }
    rows.push(row);
  }
  return rows;
}

describe("the audit CSV export's formula guard (contract §7)", () => {
  it("prefixes ' to every cell starting with = + - @ TAB or CR, and to no other cell", async () => {
    // logins are recorded with the user name they were for as the operator; a distinct X-Forwarded-For (trusted from
    // loopback) per attempt keeps each under the per-address budget of anonymous refusals, so each is one entry
    const p = await start(embedded, { GOV_SECURITY_TRUSTED_PROXIES: "loopback" });
    const root = (await p.login("root", ROOT_PASSWORD)).accessToken;
    const marker = `csvmark${Date.now().toString(36)}`;
    const dangerous = ["=", "+", "-", "@"].map((c) => `${c}1+2 ${marker}`);
    // a name starting with TAB or CR never reaches a cell as it was: controls in a login's name are written out
    const controls = ["\t", "\r"].map((c) => `${c}1+2 ${marker}`);
    const writtenOut = [`\\u00091+2 ${marker}`, `\\u000d1+2 ${marker}`];
    const normal = [`plain ${marker}`, `a=b ${marker}`, `'quoted ${marker}`, ` =spaced ${marker}`, ...writtenOut];
    const names = [...dangerous, ...controls, ...normal.slice(0, -writtenOut.length)];
    for (const [i, name] of names.entries()) {
      const res = await p.rest("POST", `/v1/authenticate/${seg(name)}/login`, { body: { password: "wrong-pass" }, headers: { "x-forwarded-for": `198.51.100.${i + 1}` } });
      expect([400, 401], JSON.stringify(name)).toContain(res.status);
    }
    // the log itself keeps the names as they were (the guard is the CSV's only), controls written out
    const logged = async () => ((await p.rest("GET", `/v1/audit-log?limit=100&query=${seg(marker)}`, { token: root })).body.list as { operator: string }[]).map((e) => e.operator);
    await expect.poll(async () => (await logged()).sort(), { timeout: 10_000 }).toEqual([...dangerous, ...normal].sort());

    const res = await fetch(`${p.url}/v1/audit-log/export?query=${seg(marker)}`, { headers: { authorization: `Bearer ${root}` } });
    expect(res.status).toBe(200);
    const [header, ...rows] = parseQuotedCsv(await res.text());
    expect(header).toEqual(["Timestamp", "Operator", "Client IP", "Resource", "Action", "Status", "Message"]);
    expect(rows).toHaveLength(names.length);
    const operators = rows.map((r) => r[1]);
    for (const name of dangerous) {
      expect(operators, `${JSON.stringify(name)} neutralised`).toContain(`'${name}`);
      expect(operators, `${JSON.stringify(name)} not left as it was`).not.toContain(name);
    }
    for (const name of normal) expect(operators, `${JSON.stringify(name)} left as it was`).toContain(name);
    expect(operators.filter((o) => o.startsWith("'")).sort()).toEqual([...dangerous.map((n) => `'${n}`), `'quoted ${marker}`].sort());
    // the other cells start with nothing dangerous and are left as they were
    for (const [ts, , ip, resource, action, status, msg] of rows) {
      expect(Date.parse(ts)).not.toBeNaN();
      expect(ip).toMatch(/^198\.51\.100\.\d+$/);
      expect(resource).toMatch(/^\/v1\/authenticate\/.+\/login$/);
      expect(action).toBe("POST");
      expect(["400", "401"]).toContain(status);
      expect(msg.startsWith("'")).toBe(false);
    }
  });
});
