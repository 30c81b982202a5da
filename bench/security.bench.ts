/**
 * What security costs (issue #9's targets), over REST with wrk like the config benchmark, every server in its own
 * process, rows interleaved in rounds with their baselines (the same server kind with security off):
 *
 * - config GET with a user's token (token verification + RBAC, cached) against security off: target ≤ 10 % less;
 * - config PUT with the audit log on `rw` against security off: target ≤ 15 % less (embedded and Redis); beside it a
 *   server with security on that audits only reads, so a PUT there pays token + RBAC without an entry: the audited
 *   PUT's cost split into those two parts;
 * - login cost: scrypt verifications per second on one core.
 *
 * Servers run from the production build when `npm run build` made one (BENCH_RUNNER=tsx: from the sources).
 * BENCH_SECONDS (default 4) and BENCH_ROUNDS (default 5) size the run (about 4 minutes).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { startRedis } from "@gov/testkit";
import { verifyPassword, hashPassword } from "../services/security/src/passwords.js";
import { CONFIG, CONNECTIONS, configRowCells, DURATION, fmt, loadConfig, measure, NS, root, ROUNDS, startServer, stop, type Server } from "./fixtures/wrk-servers.js";

const PASSWORD = "bench-root-password";
/** The production build (`npm run build` first) when present, as it runs in production; else the sources through tsx. */
const DIST = existsSync(join(root, "apps/dist/main.js")) && process.env.BENCH_RUNNER !== "tsx";
const path = `/v1/namespaces/${NS}/configs/app.yaml`;

/** A user bound `rw` on the benchmark's namespace (not the super user, who skips RBAC), logged in. */
async function userToken(s: Server): Promise<string> {
  const post = (p: string, body: unknown, token?: string, method = "POST") =>
    fetch(s.url + p, { method, body: JSON.stringify(body), headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) } }).then(async (r) => {
      if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${await r.text()}`);
      return r.json() as Promise<any>;
    });
  const root = (await post("/v1/authenticate/root/login", { password: PASSWORD })).accessToken as string;
  await post("/v1/roles/bench", { desc: "benchmark", resourceActionBind: [{ namespace: decodeURIComponent(NS), action: "rw" }] }, root, "PUT");
  await post("/v1/users/bencher", { password: PASSWORD }, root);
  await post("/v1/users/bencher/role", ["bench"], root, "PATCH");
  return `Bearer ${(await post("/v1/authenticate/bencher/login", { password: PASSWORD })).accessToken}`;
}

/** Sequential scrypt verifications in this process (one core): the cost of a login. */
async function loginCost(): Promise<{ ms: number; perSecond: number }> {
  const stored = await hashPassword(PASSWORD);
  for (let i = 0; i < 3; i++) await verifyPassword(PASSWORD, stored); // warm-up
  const n = 30;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await verifyPassword(PASSWORD, stored);
  const ms = (performance.now() - t0) / n;
  return { ms, perSecond: 1000 / ms };
}

async function main() {
  // One Redis per Redis-backed server: sharing one, each server's config writes would be echoed to the other as change
  // events (both keep a read cache of the same config), so one row's load would cost the other server CPU in the
  // middle of its own row on this 2-core host.
  const [redis, redisRw, redisRead] = await Promise.all([startRedis(), startRedis(), startRedis()]);
  const servers: Server[] = [];
  try {
    const start = async (env: Record<string, string>) => {
      const s = DIST ? await startServer("apps/dist/main.js", { GOV_SUPER_PASSWORD: PASSWORD, ...env }, false, "dist") : await startServer("apps/main.ts", { GOV_SUPER_PASSWORD: PASSWORD, ...env });
      servers.push(s);
      return s;
    };
    const offEmbedded = await start({ REDIS_URL: "", GOV_SECURITY_ENABLED: "false" });
    const onEmbedded = await start({ REDIS_URL: "", GOV_SECURITY_ENABLED: "true" });
    const rwEmbedded = await start({ REDIS_URL: "", GOV_SECURITY_ENABLED: "true", GOV_SECURITY_AUDIT_LOG_ACTION: "rw" });
    const offRedis = await start({ REDIS_URL: redis.url, GOV_SECURITY_ENABLED: "false" });
    const rwRedis = await start({ REDIS_URL: redisRw.url, GOV_SECURITY_ENABLED: "true", GOV_SECURITY_AUDIT_LOG_ACTION: "rw" });
    // Security on with only reads audited: a PUT pays the token check and RBAC but no audit entry, which splits the
    // audited PUT's cost into its two parts (the verdicts stay against security off).
    const readEmbedded = await start({ REDIS_URL: "", GOV_SECURITY_ENABLED: "true", GOV_SECURITY_AUDIT_LOG_ACTION: "read" });
    const readRedis = await start({ REDIS_URL: redisRead.url, GOV_SECURITY_ENABLED: "true", GOV_SECURITY_AUDIT_LOG_ACTION: "read" });
    const auth = new Map<Server, string>();
    for (const s of [onEmbedded, rwEmbedded, rwRedis, readEmbedded, readRedis]) auth.set(s, await userToken(s));
    for (const s of servers) {
      await fetch(s.url + path, { method: "PUT", body: CONFIG, headers: auth.has(s) ? { authorization: auth.get(s)! } : {} });
      await loadConfig(s.url + path, "GET", 2, [], auth.get(s));
      await loadConfig(s.url + path, "PUT", 2, [], auth.get(s));
    }
    const row = (name: string, s: Server, method: "GET" | "PUT", baseline: string, pids: number[]) => ({ name, url: s.url + path, method, baseline, pids, auth: auth.get(s) });
    const [rs, rsRw, rsRead] = [redis.pid!, redisRw.pid!, redisRead.pid!];
    const results = await measure([
      row("embedded, security off", offEmbedded, "GET", "embedded, security off", [offEmbedded.child.pid!]),
      row("embedded, security on (audit write)", onEmbedded, "GET", "embedded, security off", [onEmbedded.child.pid!]),
      row("redis, security off", offRedis, "GET", "redis, security off", [offRedis.child.pid!, rs]),
      row("redis, security on (audit rw)", rwRedis, "GET", "redis, security off", [rwRedis.child.pid!, rsRw]),
      row("embedded, security off", offEmbedded, "PUT", "embedded, security off", [offEmbedded.child.pid!]),
      row("embedded, security on (audit rw)", rwEmbedded, "PUT", "embedded, security off", [rwEmbedded.child.pid!]),
      row("embedded, security on (audit read: PUT not audited)", readEmbedded, "PUT", "embedded, security off", [readEmbedded.child.pid!]),
      row("redis, security off", offRedis, "PUT", "redis, security off", [offRedis.child.pid!, rs]),
      row("redis, security on (audit rw)", rwRedis, "PUT", "redis, security off", [rwRedis.child.pid!, rsRw]),
      row("redis, security on (audit read: PUT not audited)", readRedis, "PUT", "redis, security off", [readRedis.child.pid!, rsRead]),
    ]);
    const login = await loginCost();

    console.log(`Servers run from ${DIST ? "the production build (apps/dist; BENCH_RUNNER=tsx for the sources)" : "the sources through tsx (npm run build for the production build)"}.`);
    console.log(`Security benchmark: wrk -t1 -c${CONNECTIONS}, ${ROUNDS} interleaved rounds of ${DURATION} s per row (medians; ratio = median of per-round`);
    console.log("ratios to the same store with security off). Tokens are a non-super user's bound rw on the namespace (RBAC runs).");
    console.log("CPU/req: the server's CPU time per request, plus Redis's where Redis is used (server + Redis).\n");
    console.log("| server | request | req/s | p99 | ratio vs off | CPU/req | CPU ratio | req/s per round |");
    console.log("|---|---|---|---|---|---|---|---|");
    for (const r of results) {
      const cells = configRowCells(r);
      console.log(`| ${cells.join(" | ")} |`);
    }
    console.log(`\nLogin (scrypt N=2^14, r=8): ${login.ms.toFixed(1)} ms per verification, ${login.perSecond.toFixed(0)} logins/s per core\n`);
    const get = (name: string, method: string) => results.find((r) => r.name === name && r.method === method)!;
    for (const store of ["embedded", "redis"]) {
      const [audited, unaudited] = [get(`${store}, security on (audit rw)`, "PUT"), get(`${store}, security on (audit read: PUT not audited)`, "PUT")];
      console.log(`PUT, ${store}: token + RBAC ${unaudited.ratio.toFixed(2)}× security off; the audit entry on top ${(audited.ratio / unaudited.ratio).toFixed(2)}× (req/s), ${(audited.cpuRatio / unaudited.cpuRatio).toFixed(2)}× (CPU)`);
    }
    console.log("");
    const verdicts = [
      ["config GET with token + RBAC ≥ 0.90× security off (embedded)", get("embedded, security on (audit write)", "GET").ratio >= 0.9],
      ["config PUT with audit rw ≥ 0.85× security off (embedded)", get("embedded, security on (audit rw)", "PUT").ratio >= 0.85],
      ["config PUT with audit rw ≥ 0.85× security off (Redis)", get("redis, security on (audit rw)", "PUT").ratio >= 0.85],
    ] as const;
    for (const [what, ok] of verdicts) console.log(`${ok ? "met   " : "MISSED"}  ${what}`);
  } finally {
    await Promise.all(servers.map(stop));
    await Promise.all([redis.stop(), redisRw.stop(), redisRead.stop()]);
  }
}


await main();
