/**
 * What the ID generator and its monitor cost a process (issue #10's targets):
 * 1. config `GET` throughput of the all-in-one process (embedded store) with the generator on (request ids from it,
 *    idgen metric families registered) and off (`ids: false`), interleaved rounds in the same run with wrk -c32 — the
 *    house pattern of bench/config.bench.ts, whose helpers this reuses; target: on ≥ 0.95 × off;
 * 2. a `/metrics` scrape of a process whose registry holds 1,000 generators (≥ 1,000 label series per idgen
 *    family), over HTTP on its management listener; target < 10 ms.
 * BENCH_SECONDS and BENCH_ROUNDS size part 1 as in config.bench.ts.
 */
import { configModule } from "@gov/config-service";
import { SnowflakeId } from "@gov/idgen";
import { buildProcess } from "@gov/service-kit";
import { CONFIG, CONNECTIONS, DURATION, fmt, load, measure, median, NS, ROUNDS, startServer, stop } from "./config.bench.js";

const SERIES = 1_000;
const SCRAPES = 20;

async function throughput() {
  const path = `/v1/namespaces/${NS}/configs/app.yaml`;
  const on = await startServer("apps/main.ts", { REDIS_URL: "" });
  const off = await startServer("bench/fixtures/platform-without-ids.ts", { REDIS_URL: "" });
  try {
    for (const s of [on, off]) {
      await fetch(s.url + path, { method: "PUT", body: CONFIG });
      await load(s.url + path, "GET", 2); // warm-up
    }
    const offName = "all-in-one, embedded, idgen off";
    return await measure([
      { name: offName, url: off.url + path, method: "GET", baseline: offName, pids: [off.child.pid!] },
      { name: "all-in-one, embedded, idgen on", url: on.url + path, method: "GET", baseline: offName, pids: [on.child.pid!] },
    ]);
  } finally {
    await Promise.all([stop(on), stop(off)]);
  }
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
    let body = "";
    for (let i = 0; i <= SCRAPES; i++) {
      const started = performance.now();
      body = await (await fetch(`${managementUrl}/metrics`)).text();
      if (i > 0) times.push(performance.now() - started); // the first warms up
    }
    const series = body.split("\n").filter((l) => l.startsWith("idgen_ids_generated_total{")).length;
    if (series < SERIES) throw new Error(`expected ≥ ${SERIES} idgen_ids_generated_total series, got ${series}`);
    const idgenLines = body.split("\n").filter((l) => l.startsWith("idgen_")).length;
    return { median: median(times), max: Math.max(...times), idgenLines, kb: Buffer.byteLength(body) / 1024 };
  } finally {
    await proc.shutdown();
  }
}

const rows = await throughput();
const scrape = await scrapeWithManySeries();
console.log(`Config GET, all-in-one (embedded store), wrk -t1 -c${CONNECTIONS}, ${ROUNDS} interleaved rounds of ${DURATION} s (medians; ratio = median of per-round ratios):\n`);
console.log("| process | req/s | p99 | ratio vs off | CPU/req | CPU ratio | req/s per round |");
console.log("|---|---|---|---|---|---|---|");
for (const r of rows) console.log(`| ${r.name} | ${fmt(r.rps)} | ${r.p99.toFixed(1)} ms | ${r.ratio.toFixed(3)} | ${r.cpu.toFixed(0)} µs | ${r.cpuRatio.toFixed(3)} | ${r.rounds.map(fmt).join(", ")} |`);
console.log(`\n/metrics with ${SERIES} generators (${scrape.idgenLines} idgen sample lines, ${scrape.kb.toFixed(0)} KB), ${SCRAPES} sequential scrapes: median ${scrape.median.toFixed(2)} ms, slowest ${scrape.max.toFixed(2)} ms\n`);
const onRow = rows.find((r) => r.name.endsWith("on"))!;
const verdicts = [
  ["idgen on costs ≤ 5 % of config GET throughput (req/s ratio ≥ 0.95)", onRow.ratio >= 0.95],
  ["idgen on costs ≤ 5 % CPU per config GET (CPU ratio ≥ 0.95)", onRow.cpuRatio >= 0.95],
  [`/metrics scrape with ${SERIES} label series < 10 ms (median)`, scrape.median < 10],
] as const;
for (const [what, ok] of verdicts) console.log(`${ok ? "met   " : "MISSED"}  ${what}`);
process.exit(0);
