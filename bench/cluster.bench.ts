/**
 * The distributed topology (`npm run start:cluster`, scripts/cluster.mjs, on free ports): config GET, register and
 * renew through one gateway (wrk -c32) and through both (two wrk -c16 at once, one per gateway), security on, the
 * Redis Cluster of 3 masters + 3 replicas behind. Rows are interleaved in rounds; the ratio is 2 gateways over 1.
 * Beside each row: what every part of the topology spent in CPU per second of the run (cores busy), read from /proc —
 * the load generator (wrk), the gateways, each service, the workers, Redis — so the figure says what limits it.
 *
 * BENCH_SECONDS (default 4) and BENCH_ROUNDS (default 3); about 2 minutes with the cluster's start.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { findFreeBasePort, startCluster, type RunningCluster } from "../scripts/cluster.mjs";
import { CONFIG, cpuMicros, fmt, load, median, type LoadOptions, type Sample } from "./fixtures/wrk-servers.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PASSWORD = "cluster-bench-pass";
const NS = "%7Bbench%7D";
const TTL = "3600s";

/** CPU time of this process's waited-for children (wrk), in microseconds: the load generator's cost. */
function childrenCpuMicros(): number {
  const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ");
  return ((Number(fields[13]) + Number(fields[14])) * 1e6) / 100;
}

/** The parts CPU is charged to: processes grouped by what they are. */
function parts(cluster: RunningCluster): { part: string; pids: number[] }[] {
  const all = cluster.processes();
  const group = (part: string, test: (name: string) => boolean) => ({ part, pids: all.filter((p) => test(p.name)).map((p) => p.pid) });
  return [
    group("gateways", (n) => n.startsWith("gateway-")),
    group("config", (n) => n === "config"),
    group("registry", (n) => n === "registry"),
    group("security", (n) => n === "security"),
    group("stats+workers", (n) => n === "stats" || n.startsWith("worker-")),
    group("redis (6)", (n) => n.startsWith("redis-")),
  ];
}

interface Row {
  group: string;
  gateways: 1 | 2;
  path: string;
  load: Omit<LoadOptions, "seconds">;
}

interface Measured {
  rps: number;
  p99: number;
  /** Cores busy per part over the run (CPU seconds per wall second), wrk first. */
  cores: Record<string, number>;
  /** Cores left idle on the whole machine (from /proc/stat): near 0 = the machine was the limit. */
  idle: number;
}

/** The machine's idle and total jiffies so far (all cores), from /proc/stat. */
function machineJiffies(): { idle: number; total: number } {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  return { idle: f[3] + f[4], total: f.reduce((a, b) => a + b, 0) };
}

async function measure(cluster: RunningCluster, row: Row, seconds: number): Promise<Measured> {
  const charged = parts(cluster);
  const cpuOf = () => charged.map((c) => c.pids.reduce((s, pid) => s + cpuMicros(pid), 0));
  const before = cpuOf();
  const wrkBefore = childrenCpuMicros();
  const machineBefore = machineJiffies();
  const started = performance.now();
  const urls = cluster.gateways.slice(0, row.gateways).map((g) => `${g}${row.path}`);
  // two gateways: two wrk at once, each with half the connections (and its own slice of instances to register)
  const samples: Sample[] = await Promise.all(
    urls.map((url, i) =>
      // 10 s per request: 14 processes on a shared machine see stalls past wrk's 2 s default, which are slow, not lost
      load(url, { ...row.load, connections: 32 / row.gateways, seconds, timeoutSeconds: 10, unpinned: true, env: { ...row.load.env, BENCH_OFFSET: String(Number(row.load.env?.BENCH_OFFSET ?? 0) + i * 100_000) } }),
    ),
  );
  const wallUs = (performance.now() - started) * 1000;
  const after = cpuOf();
  const cores: Record<string, number> = { wrk: (childrenCpuMicros() - wrkBefore) / wallUs };
  charged.forEach((c, i) => (cores[c.part] = (after[i] - before[i]) / wallUs));
  const machine = machineJiffies();
  const idle = ((machine.idle - machineBefore.idle) / (machine.total - machineBefore.total)) * availableParallelism();
  return { rps: samples.reduce((s, x) => s + x.rps, 0), p99: Math.max(...samples.map((x) => x.p99)), cores, idle };
}

const loadBefore = loadavg();
const dir = mkdtempSync(join(tmpdir(), "gov-cluster-bench-"));
let cluster: RunningCluster | undefined;
try {
  cluster = await startCluster({ dir, basePort: await findFreeBasePort(), superPassword: PASSWORD, log: () => {}, env: { GOV_LOG_LEVEL: "warn" } });
  const [gw1] = cluster.gateways;
  const login = await fetch(`${gw1}/v1/authenticate/root/login`, { method: "POST", body: JSON.stringify({ password: PASSWORD }) });
  const auth = `Bearer ${((await login.json()) as { accessToken: string }).accessToken}`;
  const put = await fetch(`${gw1}/v1/namespaces/${NS}/configs/app.yaml`, { method: "PUT", body: CONFIG, headers: { authorization: auth, "content-type": "text/plain" } });
  if (put.status !== 200) throw new Error(`PUT config: ${put.status} ${await put.text()}`);

  const get = { script: "wrk-report.lua", env: { BENCH_METHOD: "GET", BENCH_AUTH: auth } };
  const register = { script: "wrk-registry.lua", env: { BENCH_AUTH: auth, BENCH_MODE: "REGISTER", BENCH_SERVICE: "reg", BENCH_SPREAD: "1000", BENCH_TTL: TTL } };
  const renew = { script: "wrk-registry.lua", env: { BENCH_AUTH: auth, BENCH_MODE: "RENEW", BENCH_SERVICE: "reg", BENCH_SPREAD: "1000" } };
  const rows: Row[] = [];
  for (const gateways of [1, 2] as const) {
    rows.push(
      { group: "config GET", gateways, path: `/v1/namespaces/${NS}/configs/app.yaml`, load: get },
      { group: "register", gateways, path: `/v1/namespaces/${NS}/services/reg/instances`, load: register },
      { group: "renew", gateways, path: `/v1/namespaces/${NS}/services/reg/instances`, load: renew },
    );
  }
  // the instances the renewals cycle through (each gateway's slice: h0… and h100000…), then a warm-up (JIT, pools)
  const hosts = [...Array(1000).keys()].flatMap((k) => [`h${k}`, `h${100_000 + k}`]);
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let host = hosts.pop(); host; host = hosts.pop()) {
        const body = JSON.stringify({ schema: "http", host, port: 8080, weight: 1, ttl: TTL, metadata: { zone: "a", version: "1.4.2" } });
        const res = await fetch(`${gw1}/v1/namespaces/${NS}/services/reg/instances`, { method: "PUT", body, headers: { authorization: auth, "content-type": "application/json" } });
        if (res.status !== 200) throw new Error(`register ${host}: ${res.status} ${await res.text()}`);
      }
    }),
  );
  for (const row of rows) await measure(cluster, row, 2);

  const samples = rows.map(() => [] as Measured[]);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, row] of rows.entries()) samples[i].push(await measure(cluster, row, SECONDS));
  }

  console.log(`Distributed topology on one machine (npm run start:cluster): ${availableParallelism()} cores (${cpus()[0]?.model ?? "?"}), load average before: ${loadBefore.map((l) => l.toFixed(1)).join(" ")}.`);
  console.log(`wrk -t1, 32 connections in all (two gateways: -c16 on each at once); security on (Bearer token); Redis Cluster 3 masters + 3 replicas.`);
  console.log(`${ROUNDS} interleaved rounds of ${SECONDS} s per row, medians. Cores busy = CPU seconds per wall second of each part over the run.`);
  console.log("The machine is shared with other work: compare the rows of one run, not runs.\n");
  const partNames = ["wrk", ...parts(cluster).map((p) => p.part)];
  console.log(`| request | gateways | req/s | p99 | 2 gw / 1 gw | cores busy: ${partNames.join(" / ")} | ours in all | machine idle | CPU/req: gateways + service + Redis |`);
  console.log(`|---|---|---|---|---|---|---|---|---|`);
  const results = rows.map((row, i) => {
    const xs = samples[i];
    const cores = Object.fromEntries(partNames.map((p) => [p, median(xs.map((x) => x.cores[p]))]));
    return { row, rps: median(xs.map((x) => x.rps)), p99: median(xs.map((x) => x.p99)), cores, idle: median(xs.map((x) => x.idle)), rounds: xs.map((x) => x.rps) };
  });
  for (const r of results) {
    const one = results.find((x) => x.row.group === r.row.group && x.row.gateways === 1)!;
    const ratio = r.row.gateways === 2 ? median(r.rounds.map((rps, j) => rps / one.rounds[j])).toFixed(2) : "1.00";
    const total = partNames.reduce((s, p) => s + r.cores[p], 0);
    const busiest = partNames.filter((p) => p !== "wrk").sort((a, b) => r.cores[b] - r.cores[a])[0];
    const service = r.row.group === "config GET" ? "config" : "registry";
    const perReq = (p: string) => Math.round((r.cores[p] * 1e6) / r.rps);
    console.log(
      `| ${r.row.group} | ${r.row.gateways} | ${fmt(r.rps)} | ${r.p99.toFixed(1)} ms | ${ratio} | ${partNames.map((p) => r.cores[p].toFixed(2)).join(" / ")} | ${total.toFixed(2)} (busiest: ${busiest}) | ${r.idle.toFixed(2)} | ${perReq("gateways")} + ${perReq(service)} + ${perReq("redis (6)")} µs |`,
    );
  }
  const cores = availableParallelism();
  console.log(`\nWhat limits the figure: machine idle near 0 means the ${cores} cores were the limit (ours plus whatever else runs here); then`);
  console.log("req/s ≈ cores we got / CPU per request, and CPU/req (µs of CPU per request in each part) is the figure to plan with.");
  console.log("A part near 1.00 core is a single-threaded process at its own limit (add processes of that kind).");
} finally {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
