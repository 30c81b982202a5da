/**
 * Config hot paths over REST: GET and PUT of one config, on the embedded store and on Redis, next to a bare Fastify
 * route that returns the same JSON — all measured in this run, each server in its own process, autocannon here.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { startRedis } from "@gov/testkit";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const DURATION = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = 32;
const NS = "%7Bbench%7D";
const CONFIG = "server:\n  port: 8080\n  name: orders\nfeatures:\n  - a\n  - b\n".repeat(4);

interface Server {
  child: ChildProcess;
  url: string;
}

const running = new Set<ChildProcess>();
// A failed measurement must not leave servers behind.
process.on("exit", () => running.forEach((c) => c.kill("SIGKILL")));

async function startServer(script: string, env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, ["--import", "tsx", join(root, script)], {
    cwd: root,
    env: { ...process.env, PORT: "0", GOV_GRPC_PORT: "0", HOST: "127.0.0.1", GOV_LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve({ child, url: m[1] });
    });
    child.once("exit", (code) => reject(new Error(`${script} exited with ${code}: ${out}`)));
  });
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

async function load(url: string, method: "GET" | "PUT", seconds = DURATION) {
  let i = 0;
  const result = await autocannon({
    url,
    method,
    connections: CONNECTIONS,
    duration: seconds,
    headers: { "content-type": "text/plain" },
    // PUTs alternate between two contents so every request writes a new version.
    setupClient: method === "PUT" ? (client) => client.setBody(`${CONFIG}# ${i++ % 2}`) : undefined,
    requests: method === "PUT" ? [{ setupRequest: (req) => ({ ...req, body: `${CONFIG}# ${i++ % 2}` }) }] : undefined,
  });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${method} ${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p99: result.latency.p99 };
}

async function stop(s: Server) {
  const exited = new Promise((r) => s.child.once("exit", r));
  s.child.kill("SIGTERM");
  await exited;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Rounds interleave the servers so that machine noise hits all of them alike; each row reports its median round. */
async function measure(servers: { name: string; url: string }[], method: "GET" | "PUT") {
  const samples = new Map(servers.map((s) => [s.name, [] as { rps: number; p99: number }[]]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of servers) samples.get(s.name)!.push(await load(s.url, method));
  }
  return new Map([...samples].map(([name, xs]) => [name, { rps: median(xs.map((x) => x.rps)), p99: median(xs.map((x) => x.p99)) }]));
}

async function main() {
  const redis = await startRedis();
  const path = `/v1/namespaces/${NS}/configs/app.yaml`;
  const rows: string[][] = [];
  try {
    // The baseline answers exactly the JSON a real GET answers.
    const probe = await startServer("gateway/src/main.ts", { REDIS_URL: "" });
    await fetch(probe.url + path, { method: "PUT", body: CONFIG });
    const body = await (await fetch(probe.url + path)).text();
    await stop(probe);

    const bare = await startServer("bench/fixtures/bare-fastify.ts", { BENCH_BODY: body });
    const embedded = await startServer("gateway/src/main.ts", { REDIS_URL: "" });
    const onRedis = await startServer("gateway/src/main.ts", { REDIS_URL: redis.url });
    const servers = [
      { name: "bare Fastify route", url: bare.url + path, pid: bare.child.pid! },
      { name: "gateway, embedded store", url: embedded.url + path, pid: embedded.child.pid! },
      { name: "gateway, redis store", url: onRedis.url + path, pid: onRedis.child.pid! },
    ];
    for (const s of servers) {
      await fetch(s.url, { method: "PUT", body: CONFIG });
      await load(s.url, "GET", 2); // warm-up: JIT and caches
    }
    const gets = await measure(servers, "GET");
    const puts = await measure(servers, "PUT");
    const base = { GET: gets.get(servers[0].name)!, PUT: puts.get(servers[0].name)! };
    for (const [method, results] of [["GET", gets], ["PUT", puts]] as const) {
      for (const s of servers) {
        const r = results.get(s.name)!;
        rows.push([s.name, method, fmt(r.rps), `${r.p99} ms`, (r.rps / base[method].rps).toFixed(2)]);
      }
    }
    for (const s of servers.slice(1)) rows.push([s.name, "RSS after the run", `${rssMb(s.pid)} MB`, "", ""]);
    await Promise.all([stop(bare), stop(embedded), stop(onRedis)]);
  } finally {
    await redis.stop();
  }
  console.log(`REST config benchmark: ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds of ${DURATION} s per row (median shown),`);
  console.log("autocannon in this process, each server in its own. PUTs alternate two contents, so each one writes a version.\n");
  console.log("| server | request | req/s | p99 | ratio vs bare |");
  console.log("|---|---|---|---|---|");
  for (const r of rows) console.log(`| ${r.join(" | ")} |`);
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");

await main();
