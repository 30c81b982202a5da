/**
 * What security costs (issue #9's targets), over REST with wrk like the config benchmark, every server in its own
 * process, every row measured next to its baseline, on servers started afresh every round:
 *
 * - config GET with a user's token (token verification + RBAC, cached) against security off: target ≤ 10 % less;
 * - config PUT with the audit log on `rw`: the audit entry's cost, target ≤ 15 % (embedded and Redis), measured next to
 *   a server with security on that audits only reads (its PUTs pay the token check and RBAC but write no entry). Both
 *   are also measured against security off, so the table shows what all of security costs a PUT;
 * - login cost: scrypt verifications per second on one core.
 *
 * Servers run from the production build when `npm run build` made one (BENCH_RUNNER=tsx: from the sources).
 * BENCH_SECONDS (default 4) and BENCH_ROUNDS (default 5) size the run (about 9 minutes: every round starts its servers afresh).
 * BENCH_PART=get measures only the GET target (two servers a round, ~15 s): the token check and RBAC cost a few per cent,
 * and two fresh processes of one server read up to ±15 % apart, so that verdict needs many rounds (BENCH_ROUNDS=20).
 */
import { verifyPassword, hashPassword } from "../services/security/src/passwords.js";
import { CONFIG, CONNECTIONS, configRowCells, DURATION, fmt, loadConfig, measure, mergeRounds, NS, productRunner, ROUNDS, startServer, stop, startBenchRedis, type Server } from "./fixtures/wrk-servers.js";
import { pinningLabel } from "./fixtures/cpu-pinning.js";

const PASSWORD = "bench-root-password";
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

type Results = Awaited<ReturnType<typeof measure>>;

const GET_ONLY = process.env.BENCH_PART === "get";

/** The config written once, then 2 s of GETs and 2 s of PUTs: every server of either part is warmed alike. */
async function warmUp(s: Server, auth: string | undefined): Promise<void> {
  await fetch(s.url + path, { method: "PUT", body: CONFIG, headers: auth ? { authorization: auth } : {} });
  await loadConfig(s.url + path, "GET", 2, [], auth);
  await loadConfig(s.url + path, "PUT", 2, [], auth);
}

/** Only the GET target's two rows, on two fresh servers (see measureRound). */
async function measureGetRound(round: number): Promise<Results> {
  const off = await startServer("apps/main.ts", { REDIS_URL: "", GOV_SECURITY_ENABLED: "false" });
  const on = await startServer("apps/main.ts", { REDIS_URL: "", GOV_SECURITY_ENABLED: "true", GOV_SUPER_PASSWORD: PASSWORD });
  try {
    const auth = await userToken(on);
    await warmUp(off, undefined);
    await warmUp(on, auth);
    return await measure(
      [
        { name: "embedded, security off", url: off.url + path, method: "GET", baseline: "embedded, security off", pids: [off.child.pid!] },
        { name: "embedded, security on (audit write)", url: on.url + path, method: "GET", baseline: "embedded, security off", pids: [on.child.pid!], auth },
      ],
      1,
      round,
    );
  } finally {
    await Promise.all([off, on].map(stop));
  }
}

/**
 * One round on fresh processes: servers (and their Redis) started, warmed up, measured (every row next to its
 * baseline), stopped. Two processes of the very same server measured 0.74–1.25× each other here, for a whole run
 * (how the JIT and the heap happened to settle), so a verdict from one process per kind is luck; fresh processes every
 * round put that luck into the per-round ratios, whose median then evens it out.
 */
async function measureRound(round: number): Promise<Results> {
  if (GET_ONLY) return measureGetRound(round);
  // One Redis per Redis-backed server: sharing one, each server's config writes would be echoed to the other as change
  // events (both keep a read cache of the same config), so one row's load would cost the other server CPU in the
  // middle of its own row on this 2-core host.
  const [redis, redisRw, redisRead] = await Promise.all([startBenchRedis(), startBenchRedis(), startBenchRedis()]);
  const servers: Server[] = [];
  try {
    const start = async (env: Record<string, string>) => {
      const s = await startServer("apps/main.ts", { GOV_SUPER_PASSWORD: PASSWORD, ...env });
      servers.push(s);
      return s;
    };
    const offEmbedded = await start({ REDIS_URL: "", GOV_SECURITY_ENABLED: "false" });
    const onEmbedded = await start({ REDIS_URL: "", GOV_SECURITY_ENABLED: "true" });
    const rwEmbedded = await start({ REDIS_URL: "", GOV_SECURITY_ENABLED: "true", GOV_SECURITY_AUDIT_LOG_ACTION: "rw" });
    const offRedis = await start({ REDIS_URL: redis.url, GOV_SECURITY_ENABLED: "false" });
    const rwRedis = await start({ REDIS_URL: redisRw.url, GOV_SECURITY_ENABLED: "true", GOV_SECURITY_AUDIT_LOG_ACTION: "rw" });
    // Security on with only reads audited: a PUT pays the token check and RBAC but no audit entry, which splits the
    // audited PUT's cost into its two parts.
    const readEmbedded = await start({ REDIS_URL: "", GOV_SECURITY_ENABLED: "true", GOV_SECURITY_AUDIT_LOG_ACTION: "read" });
    const readRedis = await start({ REDIS_URL: redisRead.url, GOV_SECURITY_ENABLED: "true", GOV_SECURITY_AUDIT_LOG_ACTION: "read" });
    const auth = new Map<Server, string>();
    for (const s of [onEmbedded, rwEmbedded, rwRedis, readEmbedded, readRedis]) auth.set(s, await userToken(s));
    for (const s of servers) await warmUp(s, auth.get(s));
    const row = (name: string, s: Server, method: "GET" | "PUT", baseline: string, pids: number[], group?: string) => ({ name, url: s.url + path, method, baseline, pids, auth: auth.get(s), group });
    // The audit entry's own cost: the audited server next to the one whose PUTs write no entry.
    const auditPair = (store: string, audited: Server, unaudited: Server, pids: [number[], number[]]) => [
      row(`${store}, audit read: PUT not audited`, unaudited, "PUT", `${store}, audit read: PUT not audited`, pids[1], `audit entry, ${store}`),
      row(`${store}, audit rw`, audited, "PUT", `${store}, audit read: PUT not audited`, pids[0], `audit entry, ${store}`),
    ];
    const [rs, rsRw, rsRead] = [redis.pid!, redisRw.pid!, redisRead.pid!];
    return await measure(
      [
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
        ...auditPair("embedded", rwEmbedded, readEmbedded, [[rwEmbedded.child.pid!], [readEmbedded.child.pid!]]),
        ...auditPair("redis", rwRedis, readRedis, [[rwRedis.child.pid!, rsRw], [readRedis.child.pid!, rsRead]]),
      ],
      1,
      round,
    );
  } finally {
    await Promise.all(servers.map(stop));
    await Promise.all([redis.stop(), redisRw.stop(), redisRead.stop()]);
  }
}

/** A markdown table of rows compared with `vs`. */
function printTable(rows: Results, vs: string): void {
  console.log(`| server | request | req/s | p99 | ratio vs ${vs} | CPU/req | CPU ratio | ratio per pair |`);
  console.log("|---|---|---|---|---|---|---|---|");
  for (const r of rows) console.log(`| ${configRowCells(r).join(" | ")} |`);
}

async function main() {
  const perRound: Results[] = [];
  for (let round = 0; round < ROUNDS; round++) perRound.push(await measureRound(round));
  const results = mergeRounds(perRound);
  if (GET_ONLY) {
    console.log(`Security benchmark, GET only: wrk -t1 -c${CONNECTIONS}, ${ROUNDS} rounds of two fresh servers, ${DURATION} s per row next to its baseline.`);
    console.log(`Placement: ${pinningLabel} (BENCH_PIN=0: unpinned).\n`);
    printTable(results, "off");
    const on = results.find((r) => r.name === "embedded, security on (audit write)")!;
    console.log(`\n${on.ratio >= 0.9 ? "met   " : "MISSED"}  config GET with token + RBAC ≥ 0.90× security off (embedded)`);
    return;
  }
  const login = await loginCost();

  console.log(`Servers run from ${productRunner === "dist" ? "the production build (apps/dist; BENCH_RUNNER=tsx for the sources)" : "the sources through tsx (npm run build for the production build)"}.`);
  console.log(`Security benchmark: wrk -t1 -c${CONNECTIONS}, ${ROUNDS} rounds, each on freshly started servers, of ${DURATION} s per row next to its baseline`);
  console.log("(medians; ratio = median of the pairs' ratios to the same store with security off). Tokens are a non-super user's bound rw on the namespace (RBAC runs).");
  console.log("CPU/req: the server's CPU time per request, plus Redis's where Redis is used (server + Redis).");
  console.log(`Placement: ${pinningLabel} (BENCH_PIN=0: unpinned).\n`);
  const [vsOff, auditRows] = [results.filter((r) => !r.group.startsWith("audit entry")), results.filter((r) => r.group.startsWith("audit entry"))];
  printTable(vsOff, "off");
  console.log("\nThe audit entry alone: security on with the audit log on `rw`, next to security on with PUTs not audited (`read`):\n");
  printTable(auditRows, "not audited");
  console.log(`\nLogin (scrypt N=2^14, r=8): ${login.ms.toFixed(1)} ms per verification, ${login.perSecond.toFixed(0)} logins/s per core\n`);
  const get = (name: string, method: string) => vsOff.find((r) => r.name === name && r.method === method)!;
  // What the audit log costs a PUT: the audited server next to the one whose PUTs pay the token check and RBAC but
  // write no entry.
  const auditCost = new Map<string, number>();
  for (const store of ["embedded", "redis"]) {
    const [audited, unaudited] = [get(`${store}, security on (audit rw)`, "PUT"), get(`${store}, security on (audit read: PUT not audited)`, "PUT")];
    const entry = auditRows.find((r) => r.name === `${store}, audit rw`)!;
    auditCost.set(store, entry.ratio);
    console.log(`PUT, ${store}: all of security ${audited.ratio.toFixed(2)}× off; token + RBAC ${unaudited.ratio.toFixed(2)}× off; the audit entry ${entry.ratio.toFixed(2)}× (req/s; CPU ${entry.cpuRatio.toFixed(2)}×)`);
  }
  console.log("");
  const verdicts = [
    ["config GET with token + RBAC ≥ 0.90× security off (embedded)", get("embedded, security on (audit write)", "GET").ratio >= 0.9],
    ["config PUT: the audit entry on rw costs ≤ 15 % (embedded)", auditCost.get("embedded")! >= 0.85],
    ["config PUT: the audit entry on rw costs ≤ 15 % (Redis)", auditCost.get("redis")! >= 0.85],
  ] as const;
  for (const [what, ok] of verdicts) console.log(`${ok ? "met   " : "MISSED"}  ${what}`);
}


await main();
