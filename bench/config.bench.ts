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
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startRedis } from "@gov/testkit";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const DURATION = Number(process.env.BENCH_SECONDS ?? 4);
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
export const CONNECTIONS = 32;
const PROFILE_DIR = process.env.BENCH_PROFILE;
export const NS = "%7Bbench%7D";
export const CONFIG = "server:\n  port: 8080\n  name: orders\nfeatures:\n  - a\n  - b\n".repeat(4);
const WRK_SCRIPT = join(root, "bench/fixtures/wrk-report.lua");

interface Server {
  child: ChildProcess;
  url: string;
  /** The management listener (`/metrics`); undefined for the bare baseline. */
  managementUrl?: string;
  /** Milliseconds from spawn to the "listening" banner. */
  startupMs: number;
}

/** How a gateway is run: from the TypeScript sources through tsx (as `npm run dev`), or the production build. */
type Runner = "tsx" | "dist";

const running = new Set<ChildProcess>();
// A failed measurement must not leave servers behind.
process.on("exit", () => running.forEach((c) => c.kill("SIGKILL")));

export async function startServer(script: string, env: Record<string, string>, profile = false, runner: Runner = "tsx"): Promise<Server> {
  const prof = profile && PROFILE_DIR ? ["--cpu-prof", "--cpu-prof-dir", PROFILE_DIR] : [];
  // The production build resolves workspaces to their dist/ (no @gov/source condition, no TypeScript loader).
  const args = runner === "tsx" ? [...prof, "--import", "tsx", join(root, script)] : [...prof, join(root, script)];
  const { NODE_OPTIONS, ...inherited } = process.env;
  const nodeOptions = runner === "tsx" ? { NODE_OPTIONS: NODE_OPTIONS ?? "--conditions=@gov/source" } : {};
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...inherited, ...nodeOptions, PORT: "0", GOV_GRPC_PORT: "0", MANAGEMENT_SERVER_PORT: "0", HOST: "127.0.0.1", GOV_LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let out = "";
  return new Promise((resolve, reject) => {
    // The startup banner goes to stdout at a terminal, else to stderr: read both.
    const scan = (d: Buffer) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      // The gateway prints its management URL in the same banner, right after; the bare baseline has none.
      const mgmt = /Management on (http:\/\/\S+)/.exec(out);
      if (m && (mgmt || script.includes("bare"))) resolve({ child, url: m[1], managementUrl: mgmt?.[1], startupMs: performance.now() - started });
    };
    child.stdout!.on("data", scan);
    child.stderr!.on("data", scan);
    child.once("exit", (code) => reject(new Error(`${script} exited with ${code}: ${out}`)));
  });
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

/** CPU time (user + system) a process has used so far, in microseconds. */
function cpuMicros(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
}
const CLOCK_TICKS = 100; // USER_HZ: 100 on every Linux build Node supports

interface Sample {
  rps: number;
  p99: number; // ms
  /** CPU the server process and Redis spent per request (µs): less sensitive than req/s to other load on the host. */
  cpu: number;
  /** The same, per process (server, then Redis). */
  cpuParts: number[];
}

/** One wrk run (one thread: the server under test and Redis need the other cores more than the load generator). */
export async function load(url: string, method: "GET" | "PUT", seconds = DURATION, pids: number[] = []): Promise<Sample> {
  const cpuBefore = pids.map(cpuMicros);
  const { stdout } = await promisify(execFile)("wrk", ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "-s", WRK_SCRIPT, url], {
    env: { ...process.env, BENCH_METHOD: method, BENCH_CONTENT: CONFIG },
  });
  const line = /WRK_JSON (\{.*\})/.exec(stdout);
  if (!line) throw new Error(`wrk printed no summary for ${method} ${url}:\n${stdout}`);
  const r = JSON.parse(line[1]) as { requests: number; durationUs: number; p99Us: number; statusErrors: number; socketErrors: number };
  if (r.statusErrors > 0 || r.socketErrors > 0) throw new Error(`${method} ${url}: ${r.statusErrors} non-2xx, ${r.socketErrors} socket errors`);
  const cpuParts = pids.map((pid, i) => (cpuMicros(pid) - cpuBefore[i]) / r.requests);
  return { rps: r.requests / (r.durationUs / 1e6), p99: r.p99Us / 1000, cpu: cpuParts.reduce((a, b) => a + b, 0), cpuParts };
}

export async function stop(s: Server) {
  if (s.child.exitCode !== null) return;
  const exited = new Promise((r) => s.child.once("exit", r));
  s.child.kill("SIGTERM");
  await exited;
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Target {
  name: string;
  url: string;
  method: "GET" | "PUT";
  /** Name of the row this one is compared with. */
  baseline: string;
  /** Processes whose CPU time is charged to the requests: the server, and Redis when it is used. */
  pids: number[];
}

/**
 * Rounds interleave the rows so that machine noise (other work on a shared host) hits all of them alike. Each row
 * reports its median rate and median p99, and its ratio is the median of its per-round ratios to its baseline.
 */
export async function measure(targets: Target[]) {
  const key = (name: string, method: string) => `${method} ${name}`;
  const samples = new Map(targets.map((t) => [key(t.name, t.method), [] as Sample[]]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const t of targets) samples.get(key(t.name, t.method))!.push(await load(t.url, t.method, DURATION, t.pids));
  }
  return targets.map((t) => {
    const xs = samples.get(key(t.name, t.method))!;
    const base = samples.get(key(t.baseline, t.method))!;
    return {
      ...t,
      rps: median(xs.map((x) => x.rps)),
      p99: median(xs.map((x) => x.p99)),
      ratio: median(xs.map((x, i) => x.rps / base[i].rps)),
      cpu: median(xs.map((x) => x.cpu)),
      cpuParts: t.pids.map((_, i) => median(xs.map((x) => x.cpuParts[i]))),
      cpuRatio: median(xs.map((x, i) => base[i].cpu / x.cpu)),
      rounds: xs.map((x) => Math.round(x.rps)),
    };
  });
}

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
      const s = await startServer(runner === "dist" ? dist : "apps/main.ts", { REDIS_URL: "" }, false, runner);
      try {
        runs[runner].startup.push(s.startupMs);
        runs[runner].rss.push(rssMb(s.child.pid!));
        await fetch(s.url + path, { method: "PUT", body: CONFIG });
        await load(s.url + path, "GET", 3);
        await load(s.url + path, "PUT", 3);
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
  const redis = await startRedis();
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
        await load(s.url + path, "GET", 2); // warm-up: JIT and caches
        await load(s.url + path, "PUT", 2);
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
  console.log(`REST config benchmark: wrk -t1 -c${CONNECTIONS}, ${ROUNDS} interleaved rounds of ${DURATION} s per row (medians shown;`);
  console.log("ratio = median of the per-round ratios). Each server in its own process; every PUT writes a new version.");
  console.log("CPU/req = CPU time per request of the server process, plus Redis's where Redis is used (server + Redis);");
  console.log("CPU ratio = bare's CPU/req divided by this row's: the req/s ratio when CPU is the only limit, steadier than req/s");
  console.log("on a host shared with other work.\n");
  console.log("| server | request | req/s | p99 | ratio vs bare | CPU/req | CPU ratio | req/s per round |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    const cells = [r.name, r.method, fmt(r.rps), `${r.p99.toFixed(1)} ms`, r.ratio.toFixed(2), `${r.cpu.toFixed(0)} µs${r.cpuParts.length > 1 ? ` (${r.cpuParts.map((c) => c.toFixed(0)).join(" + ")})` : ""}`, r.cpuRatio.toFixed(2), r.rounds.map(fmt).join(", ")];
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

export const fmt = (n: number) => Math.round(n).toLocaleString("en-US");

// Other benchmarks reuse the server, load and measurement helpers above (bench/idgen-monitor.bench.ts).
if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
