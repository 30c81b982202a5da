/**
 * What the ID generator and its monitor cost a process (issue #10's targets):
 * 1. config `GET` throughput of the all-in-one process (embedded store) with the generator on (request ids from it,
 *    idgen metric families registered) and off (`ids: false`), interleaved rounds in the same run with wrk -c32 — the
 *    house pattern of bench/config.bench.ts (helpers in bench/fixtures/wrk-servers.ts); target: on ≥ 0.95 × off;
 * 2. a `/metrics` scrape of a process whose registry holds 1,000 generators (≥ 1,000 label series per idgen
 *    family), over HTTP on its management listener; target < 10 ms.
 * On a host shared with other work req/s and even CPU per request swing by more than the 5 % measured, so both
 * servers run under `node --cpu-prof` (the same overhead on each side), and the bench reports the share of its busy CPU time spent in the
 * generator's and the monitor's own code (self time of @gov/idgen and @gov/idgen-monitor functions): a number the
 * neighbours cannot move.
 * BENCH_SECONDS and BENCH_ROUNDS size part 1 as in config.bench.ts.
 */
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { configModule } from "@gov/config-service";
import { SnowflakeId } from "@gov/idgen";
import { buildProcess } from "@gov/service-kit";

process.env.BENCH_PROFILE ??= mkdtempSync(join(tmpdir(), "idgen-bench-")); // read by fixtures/wrk-servers.ts when imported
const PROFILES = process.env.BENCH_PROFILE;
const { CONFIG, CONNECTIONS, DURATION, fmt, loadConfig, measure, median, NS, pairRatiosCell, ROUNDS, startServer, stop } = await import("./fixtures/wrk-servers.js");

const SERIES = 1_000;
const SCRAPES = 20;
// Prometheus scrapes one process every 15 s for its whole life: what counts is the steady state, once the JIT has
// compiled the scrape path (the first few scrapes of a process take about twice as long; printed below).
const WARM_UP = 30;

async function throughput() {
  const path = `/v1/namespaces/${NS}/configs/app.yaml`;
  const on = await startServer("apps/main.ts", { REDIS_URL: "" }, true);
  // both under the profiler, so that its overhead does not tilt the ratios
  const off = await startServer("bench/fixtures/platform-without-ids.ts", { REDIS_URL: "" }, true);
  try {
    for (const s of [on, off]) {
      await fetch(s.url + path, { method: "PUT", body: CONFIG });
      await loadConfig(s.url + path, "GET", 2); // warm-up
    }
    const offName = "all-in-one, embedded, idgen off";
    const rows = await measure([
      { name: offName, url: off.url + path, method: "GET", baseline: offName, pids: [off.child.pid!] },
      { name: "all-in-one, embedded, idgen on", url: on.url + path, method: "GET", baseline: offName, pids: [on.child.pid!] },
    ]);
    return { rows, pid: on.child.pid! };
  } finally {
    await Promise.all([stop(on), stop(off)]); // SIGTERM: the profile is written at exit
  }
}

type ProfileNode = { id: number; callFrame: { url: string; functionName: string } };

/** Busy CPU time of the "on" server's main thread, and the part of it in the generator's and the monitor's code. */
function idgenShare(pid: number): { busyMs: number; share: number; top: string[] } {
  const file = readdirSync(PROFILES).find((f) => f.includes(`.${pid}.0.`) && f.endsWith(".cpuprofile"));
  if (!file) throw new Error(`no CPU profile of process ${pid} in ${PROFILES}`);
  const profile = JSON.parse(readFileSync(join(PROFILES, file), "utf8")) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  const nodes = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  let busy = 0;
  let ours = 0;
  const byFunction = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const frame = nodes.get(id)!;
    const dt = profile.timeDeltas[i];
    if (frame.functionName === "(idle)") return;
    busy += dt;
    if (/\/packages\/idgen(-monitor)?\/src\//.test(frame.url)) {
      ours += dt;
      const key = `${frame.functionName || "(anonymous)"} (${frame.url.split("/").pop()})`;
      byFunction.set(key, (byFunction.get(key) ?? 0) + dt);
    }
  });
  const top = [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([k, v]) => `${k} ${((100 * v) / busy).toFixed(2)} %`);
  return { busyMs: busy / 1000, share: ours / busy, top };
}

async function scrapeWithManySeries() {
  const proc = await buildProcess({ name: "gov.config-service", modules: [configModule], sources: { file: {}, env: { GOV_LOG_LEVEL: "warn" } } });
  const { managementUrl } = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
  try {
    for (let i = 0; i < SERIES; i++) {
      const g = new SnowflakeId({ machine: 1, name: `g${i}` });
      for (let k = 0; k <= i % 7; k++) g.nextId();
      proc.monitor!.idgen.registry.set(`g${i}`, g);
    }
    const times: number[] = [];
    const first: number[] = [];
    const cpu: number[] = [];
    let body = "";
    for (let i = 0; i < WARM_UP + SCRAPES; i++) {
      const started = performance.now();
      const cpuBefore = process.cpuUsage();
      body = await (await fetch(`${managementUrl}/metrics`)).text();
      const used = process.cpuUsage(cpuBefore);
      if (i < WARM_UP) {
        if (i < 5) first.push(performance.now() - started); // a fresh process's first scrapes, before the JIT has compiled the path
        continue;
      }
      times.push(performance.now() - started);
      // server and client share this process: its CPU time bounds the scrape's from above, whatever the neighbours do
      cpu.push((used.user + used.system) / 1000);
    }
    const series = body.split("\n").filter((l) => l.startsWith("idgen_ids_generated_total{")).length;
    if (series < SERIES) throw new Error(`expected ≥ ${SERIES} idgen_ids_generated_total series, got ${series}`);
    const idgenLines = body.split("\n").filter((l) => l.startsWith("idgen_")).length;
    return { median: median(times), max: Math.max(...times), first: median(first), cpu: median(cpu), idgenLines, kb: Buffer.byteLength(body) / 1024 };
  } finally {
    await proc.shutdown();
  }
}

const { rows, pid } = await throughput();
const profile = idgenShare(pid);
const scrape = await scrapeWithManySeries();
console.log(`Config GET, all-in-one (embedded store), wrk -t1 -c${CONNECTIONS}, ${ROUNDS} rounds of ${DURATION} s, each row next to its baseline (medians; ratio = median of the pairs' ratios):\n`);
console.log("| process | req/s | p99 | ratio vs off | CPU/req | CPU ratio | ratio per pair |");
console.log("|---|---|---|---|---|---|---|");
for (const r of rows) console.log(`| ${r.name} | ${fmt(r.rps)} | ${r.p99.toFixed(1)} ms | ${r.ratio.toFixed(3)} | ${r.cpu.toFixed(0)} µs | ${r.cpuRatio.toFixed(3)} | ${pairRatiosCell(r.pairRatios)} |`);
console.log(`\nCPU profile of the "on" server over the whole run: ${(profile.share * 100).toFixed(2)} % of its busy time (${fmt(profile.busyMs)} ms) in @gov/idgen and @gov/idgen-monitor code (${profile.top.join(", ")})`);
console.log(`\n/metrics with ${SERIES} generators (${scrape.idgenLines} idgen sample lines, ${scrape.kb.toFixed(0)} KB), ${SCRAPES} sequential scrapes after ${WARM_UP} (the first five: median ${scrape.first.toFixed(2)} ms): median ${scrape.median.toFixed(2)} ms, slowest ${scrape.max.toFixed(2)} ms; CPU per scrape (server + client) median ${scrape.cpu.toFixed(2)} ms\n`);
const onRow = rows.find((r) => r.name.endsWith("on"))!;
const verdicts = [
  ["idgen on costs ≤ 5 % of config GET throughput (req/s ratio ≥ 0.95)", onRow.ratio >= 0.95],
  ["idgen on costs ≤ 5 % CPU per config GET (CPU ratio ≥ 0.95)", onRow.cpuRatio >= 0.95],
  ["≤ 5 % of the busy CPU time of the \"on\" server is in the generator and the monitor (profile)", profile.share <= 0.05],
  [`/metrics scrape with ${SERIES} label series < 10 ms (median wall time)`, scrape.median < 10],
  [`/metrics scrape with ${SERIES} label series < 10 ms of CPU (median, server + client)`, scrape.cpu < 10],
] as const;
for (const [what, ok] of verdicts) console.log(`${ok ? "met   " : "MISSED"}  ${what}`);
process.exit(0);
