/**
 * Config hot paths over REST, measured with wrk (the house load generator, `-c32`): GET and PUT of one config on the
 * embedded store and on Redis, next to the house baselines measured in the same run — a bare Fastify GET route
 * returning the same JSON, and a bare Fastify PUT route doing one ioredis HSET against the same Redis. Every server
 * runs in its own process; every PUT carries new content, so each one writes a new version.
 *
 * After the load it times `/metrics` scrapes on each gateway's management listener (every per-RPC series present),
 * and prints which targets (issues #5 and #6) are met. Then it starts the all-in-one process from the production build
 * (`npm run build` first; skipped when apps/dist is missing) and from the sources through tsx, alternately, and
 * reports time to "listening" and RSS when listening and after a short load (BENCH_STARTUP=0 skips this part).
 *
 * BENCH_SECONDS (default 4) and BENCH_ROUNDS (default 5; about 3.5 minutes in all) size the run; BENCH_PROFILE=<dir>
 * runs the gateways with `node --cpu-prof` and writes their profiles there (open them in Chrome DevTools or speedscope).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CONFIG, CONNECTIONS, configRowCells, DURATION, fmt, loadConfig, measure, median, NS, PROFILE_DIR, ROUNDS, root, rssMb, startServer, stop, startBenchRedis, type Runner, type Server } from "./fixtures/wrk-servers.js";
import { pinningLabel } from "./fixtures/cpu-pinning.js";

/**
 * A Prometheus scrape of a gateway's management listener after the load, when every per-RPC series it served exists:
 * median and slowest of SCRAPES sequential scrapes (ms), and the size of the exposition.
 */
async function scrapeTimes(s: Server): Promise<{ median: number; max: number; kb: number }> {
  const times: number[] = [];
  let body = "";
  for (let i = 0; i <= SCRAPES; i++) {
    const start = performance.now();
    const res = await fetch(`${s.managementUrl}/metrics`);
    body = await res.text();
    if (i > 0) times.push(performance.now() - start); // the first one warms up
    if (res.status !== 200 || !body.includes("gov_rpc_duration_seconds_bucket{")) throw new Error(`/metrics of ${s.url} has no per-RPC series:\n${body.slice(0, 300)}`);
  }
  return { median: median(times), max: Math.max(...times), kb: Buffer.byteLength(body) / 1024 };
}
const SCRAPES = 20;

/**
 * Startup and memory of the all-in-one process (embedded store), run from the production build (`npm run build`,
 * `node apps/dist/main.js`) and from the sources through tsx: time from spawn to the "listening" banner, RSS right
 * then and after a short GET + PUT load. Rounds alternate the two; medians shown.
 */
async function startupRows(): Promise<string[][]> {
  const dist = "apps/dist/main.js";
  if (!existsSync(join(root, dist))) return [["startup", `skipped: ${dist} is missing, run npm run build first`]];
  const path = `/v1/namespaces/${NS}/configs/app.yaml`;
  const runs: Record<Runner, { startup: number[]; rss: number[]; rssLoaded: number[] }> = {
    dist: { startup: [], rss: [], rssLoaded: [] },
    tsx: { startup: [], rss: [], rssLoaded: [] },
  };
  for (let round = 0; round < STARTUP_ROUNDS; round++) {
    for (const runner of ["dist", "tsx"] as const) {
      const s = await startServer(runner === "dist" ? dist : "apps/main.ts", { REDIS_URL: "" }, false, runner, false);
      try {
        runs[runner].startup.push(s.startupMs);
        runs[runner].rss.push(rssMb(s.child.pid!));
        await fetch(s.url + path, { method: "PUT", body: CONFIG });
        await loadConfig(s.url + path, "GET", 3);
        await loadConfig(s.url + path, "PUT", 3);
        runs[runner].rssLoaded.push(rssMb(s.child.pid!));
      } finally {
        await stop(s);
      }
    }
  }
  return (["dist", "tsx"] as const).map((r) => [
    r === "dist" ? "production build (node apps/dist/main.js)" : "sources through tsx (node --import tsx apps/main.ts)",
    `${Math.round(median(runs[r].startup))} ms`,
    `${median(runs[r].rss)} MB`,
    `${median(runs[r].rssLoaded)} MB`,
  ]);
}
const STARTUP_ROUNDS = Number(process.env.BENCH_STARTUP_ROUNDS ?? 3);

async function main() {
  const redis = await startBenchRedis();
  const path = `/v1/namespaces/${NS}/configs/app.yaml`;
  let results: Awaited<ReturnType<typeof measure>> = [];
  const rss: string[][] = [];
  const scrapes: [string, Awaited<ReturnType<typeof scrapeTimes>>][] = [];
  try {
    // The GET baseline answers exactly the JSON a real GET answers.
    const probe = await startServer("apps/main.ts", { REDIS_URL: "" });
    await fetch(probe.url + path, { method: "PUT", body: CONFIG });
    const body = await (await fetch(probe.url + path)).text();
    await stop(probe);

    const bare = await startServer("bench/fixtures/bare-fastify.ts", { BENCH_BODY: body, REDIS_URL: redis.url });
    const embedded = await startServer("apps/main.ts", { REDIS_URL: "" }, true);
    const onRedis = await startServer("apps/main.ts", { REDIS_URL: redis.url }, true);
    const servers = [bare, embedded, onRedis];
    try {
      for (const s of servers) {
        await fetch(s.url + path, { method: "PUT", body: CONFIG });
        await loadConfig(s.url + path, "GET", 2); // warm-up: JIT and caches
        await loadConfig(s.url + path, "PUT", 2);
      }
      const bareGet = "bare Fastify route (same JSON)";
      const bareHset = "bare Fastify route (one HSET)";
      const [b, e, r, rs] = [bare.child.pid!, embedded.child.pid!, onRedis.child.pid!, redis.pid!];
      results = await measure([
        { name: bareGet, url: bare.url + path, method: "GET", baseline: bareGet, pids: [b] },
        { name: "gateway, embedded store", url: embedded.url + path, method: "GET", baseline: bareGet, pids: [e] },
        { name: "gateway, redis store", url: onRedis.url + path, method: "GET", baseline: bareGet, pids: [r, rs] },
        { name: bareHset, url: bare.url + path, method: "PUT", baseline: bareHset, pids: [b, rs] },
        { name: "gateway, embedded store", url: embedded.url + path, method: "PUT", baseline: bareHset, pids: [e] },
        { name: "gateway, redis store", url: onRedis.url + path, method: "PUT", baseline: bareHset, pids: [r, rs] },
      ]);
      for (const [name, s] of [["gateway, embedded store", embedded], ["gateway, redis store", onRedis]] as const) {
        rss.push([name, "RSS after the run", `${rssMb(s.child.pid!)} MB`, "", ""]);
        scrapes.push([name, await scrapeTimes(s)]);
      }
    } finally {
      await Promise.all(servers.map(stop));
    }
  } finally {
    await redis.stop();
  }
  console.log(`REST config benchmark: wrk -t1 -c${CONNECTIONS}, ${ROUNDS} rounds; each round measures every row for ${DURATION} s right next to its`);
  console.log("baseline (medians shown; ratio = median of the pairs' ratios). Each server in its own process; every PUT writes a new version.");
  console.log("CPU/req = CPU time per request of the server process, plus Redis's where Redis is used (server + Redis);");
  console.log("CPU ratio = bare's CPU/req divided by this row's: the req/s ratio when CPU is the only limit, steadier than req/s");
  console.log("on a host shared with other work.");
  console.log(`Placement: ${pinningLabel} (BENCH_PIN=0: unpinned).\n`);
  console.log("| server | request | req/s | p99 | ratio vs bare | CPU/req | CPU ratio | ratio per pair |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    const cells = configRowCells(r);
    console.log(`| ${cells.join(" | ")} |`);
  }
  for (const r of rss) console.log(`| ${r.join(" | ")} | | | |`);
  console.log(`\n/metrics on the management listener after the load (all per-RPC series present), ${SCRAPES} sequential scrapes; target < 10 ms:\n`);
  console.log("| server | median | slowest | size |");
  console.log("|---|---|---|---|");
  for (const [name, t] of scrapes) console.log(`| ${name} | ${t.median.toFixed(2)} ms | ${t.max.toFixed(2)} ms | ${t.kb.toFixed(0)} KB |`);

  const get = (name: string, method: string) => results.find((r) => r.name === name && r.method === method)!;
  const verdicts = [
    ["GET through the gateway (embedded) ≥ 0.7× bare GET", get("gateway, embedded store", "GET").ratio >= 0.7],
    ["GET through the gateway (Redis) ≥ 0.7× bare GET", get("gateway, redis store", "GET").ratio >= 0.7],
    ["PUT on Redis ≥ 0.8× bare HSET route", get("gateway, redis store", "PUT").ratio >= 0.8],
    ["/metrics scrape < 10 ms", scrapes.every(([, t]) => t.median < 10)],
  ] as const;
  console.log("");
  for (const [what, ok] of verdicts) console.log(`${ok ? "met   " : "MISSED"}  ${what}`);
  if (PROFILE_DIR) console.log(`\nCPU profiles of the gateways: ${PROFILE_DIR}`);

  if (process.env.BENCH_STARTUP !== "0") {
    console.log(`\nStartup of the all-in-one process (embedded store), median of ${STARTUP_ROUNDS} alternating starts each; load = 3 s GET + 3 s PUT:\n`);
    console.log("| run from | spawn → listening | RSS when listening | RSS after load |");
    console.log("|---|---|---|---|");
    for (const row of await startupRows()) console.log(`| ${row.join(" | ")} |`);
  }
}


// Other benchmarks reuse the server, load and measurement helpers above (bench/idgen-monitor.bench.ts).
await main();
