/**
 * Registry hot paths over REST through the gateway (issue #7 targets), measured with wrk -c32 next to bare Fastify
 * baselines measured in the same run, each server in its own process:
 *  - list-instances of a 10-instance service and /lb, on the embedded store and on Redis (served from the read cache
 *    kept by the change events), vs a bare GET route answering the same JSON: targets ≥ 0.7× embedded, ≥ 0.6× Redis;
 *  - register and renew on Redis vs a bare PUT route doing one ioredis HSET + PEXPIRE (one round trip): ≥ 0.8×.
 * Then the scale part, on a Redis of its own: BENCH_SCALE (default 100,000) instances registered through the gateway in
 * one namespace (services of 1,000), register throughput per tenth (the curve must stay flat), Redis memory per
 * instance (MEMORY USAGE of the service's keys, plus its share of the service index), and list-instances of a
 * 1,000-instance service: p99 one call at a time (target < 20 ms) and under -c32.
 *
 * BENCH_SECONDS (default 3) and BENCH_ROUNDS (default 3) size the hot part (about 3 minutes: every round starts its
 * servers afresh), BENCH_PART=hot|scale
 * runs one part, BENCH_PROFILE=<dir> runs the gateways with `node --cpu-prof` (profiles written there).
 */
import { Redis } from "ioredis";
import { fmt, load, measureRounds, mergeRounds, pairRatiosCell, startServer, startBenchRedis, stop, type Row } from "./fixtures/http-bench.js";
import { pinningLabel } from "./fixtures/cpu-pinning.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SCALE = Number(process.env.BENCH_SCALE ?? 100_000);
const PART = process.env.BENCH_PART ?? "all";
const PROFILE_DIR = process.env.BENCH_PROFILE;
const NS = "%7Bbench%7D";
const services = (url: string) => `${url}/v1/namespaces/${NS}/services`;
const TTL = "3600s"; // the benchmark outlasts the default ttl

async function put(url: string, body?: unknown): Promise<void> {
  const res = await fetch(url, { method: "PUT", ...(body ? { body: JSON.stringify(body), headers: { "content-type": "application/json" } } : {}) });
  if (res.status !== 200) throw new Error(`PUT ${url}: ${res.status} ${await res.text()}`);
}

/** Ten instances of "order" with a little metadata and mixed weights. */
async function registerTen(url: string): Promise<void> {
  for (let port = 1; port <= 10; port++) {
    await put(`${services(url)}/order/instances`, { schema: "http", host: "10.0.0.1", port, weight: 1 + (port % 3), ttl: TTL, metadata: { zone: port % 2 ? "a" : "b", version: "1.4.2" } });
  }
}

type HotRow = Row;

/**
 * One round on fresh processes: a Redis, the gateway on each store, the bare baselines; warmed up, every row measured
 * once next to its baseline, all stopped. Two processes of one build read /lb 0.52× and 0.85× the same bare route here
 * (how the JIT and heap settled, where the scheduler put them beside wrk), so one process per kind decides nothing.
 */
async function hotRound(round: number) {
  const redis = await startBenchRedis();
  const servers: Awaited<ReturnType<typeof startServer>>[] = [];
  try {
    const embedded = await startServer("apps/main.ts", { REDIS_URL: "" }, PROFILE_DIR);
    servers.push(embedded);
    const onRedis = await startServer("apps/main.ts", { REDIS_URL: redis.url }, PROFILE_DIR);
    servers.push(onRedis);
    await registerTen(embedded.url);
    await registerTen(onRedis.url);
    // The GET baselines answer exactly the JSON the real GETs answer.
    const listBody = await (await fetch(`${services(embedded.url)}/order/instances`)).text();
    const lbBody = await (await fetch(`${services(embedded.url)}/order/lb`)).text();
    const bare = await startServer("bench/fixtures/bare-registry.ts", { BENCH_LIST_BODY: listBody, BENCH_LB_BODY: lbBody, REDIS_URL: redis.url });
    servers.push(bare);
    const get = { script: "wrk-registry.lua" };
    const register = { script: "wrk-registry.lua", env: { BENCH_MODE: "REGISTER", BENCH_SERVICE: "reg", BENCH_SPREAD: "1000", BENCH_TTL: TTL } };
    const renew = { script: "wrk-registry.lua", env: { BENCH_MODE: "RENEW", BENCH_SERVICE: "reg", BENCH_SPREAD: "1000" } };
    const [b, e, r, rs] = [bare.pid, embedded.pid, onRedis.pid, redis.pid!];
    const rows: HotRow[] = [];
    for (const [group, path] of [["list-instances (10)", "order/instances"], ["/lb (10)", "order/lb"]] as const) {
      rows.push(
        { group, name: BARE_GET, url: `${services(bare.url)}/${path}`, load: { ...get, pids: [b] }, baseline: BARE_GET },
        { group, name: "gateway, embedded store", url: `${services(embedded.url)}/${path}`, load: { ...get, pids: [e] }, baseline: BARE_GET },
        { group, name: "gateway, redis store", url: `${services(onRedis.url)}/${path}`, load: { ...get, pids: [r, rs] }, baseline: BARE_GET },
      );
    }
    for (const [group, how] of [["register", register], ["renew", renew]] as const) {
      rows.push(
        { group, name: BARE_WRITE, url: `${services(bare.url)}/reg/instances`, load: { ...how, pids: [b, rs] }, baseline: BARE_WRITE },
        { group, name: "gateway, redis store", url: `${services(onRedis.url)}/reg/instances`, load: { ...how, pids: [r, rs] }, baseline: BARE_WRITE },
      );
    }
    // warm-up (JIT, caches) and the 1,000 instances the renewals need
    for (const row of rows) await load(row.url, { ...row.load, seconds: 2 });
    return await measureRounds(rows, 1, SECONDS, round);
  } finally {
    await Promise.all(servers.map(stop));
    await redis.stop();
  }
}

const BARE_GET = "bare Fastify route (same JSON)";
const BARE_WRITE = "bare Fastify route (HSET + PEXPIRE)";

async function hotPart() {
  const perRound = [];
  for (let round = 0; round < ROUNDS; round++) perRound.push(await hotRound(round));
  const results = mergeRounds(perRound);

  console.log(`REST registry benchmark: wrk -t1 -c32, ${ROUNDS} rounds, each on freshly started servers (a Redis, the gateway on each store,`);
  console.log(`the bare routes), of ${SECONDS} s per row next to its bare route (medians; ratio = median of the pairs' ratios). CPU/req = CPU`);
  console.log("time per request of the server, plus Redis's where it is used (server + Redis); CPU ratio = bare's CPU/req over this row's");
  console.log("(steadier than req/s on a shared host). Register cycles through 1,000 instances (each a full re-registration), renew");
  console.log("through the same 1,000.");
  console.log(`Placement: ${pinningLabel} (BENCH_PIN=0: unpinned).\n`);
  console.log("| request | server | req/s | p99 | ratio vs bare | CPU/req | CPU ratio | ratio per pair |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const x of results) {
    console.log(`| ${x.group} | ${x.name} | ${fmt(x.rps)} | ${x.p99.toFixed(1)} ms | ${x.ratio.toFixed(2)} | ${x.cpu.toFixed(0)} µs${x.cpuParts.length > 1 ? ` (${x.cpuParts.map((c) => c.toFixed(0)).join(" + ")})` : ""} | ${x.cpuRatio.toFixed(2)} | ${pairRatiosCell(x.pairRatios)} |`);
  }
  const ratio = (group: string, name: string) => results.find((x) => x.group === group && x.name === name)!.ratio;
  const verdicts: [string, boolean][] = [
    ["list-instances, embedded ≥ 0.7× bare", ratio("list-instances (10)", "gateway, embedded store") >= 0.7],
    ["/lb, embedded ≥ 0.7× bare", ratio("/lb (10)", "gateway, embedded store") >= 0.7],
    ["list-instances, Redis ≥ 0.6× bare", ratio("list-instances (10)", "gateway, redis store") >= 0.6],
    ["/lb, Redis ≥ 0.6× bare", ratio("/lb (10)", "gateway, redis store") >= 0.6],
    ["register, Redis ≥ 0.8× bare HSET + PEXPIRE", ratio("register", "gateway, redis store") >= 0.8],
    ["renew, Redis ≥ 0.8× bare HSET + PEXPIRE", ratio("renew", "gateway, redis store") >= 0.8],
  ];
  console.log("");
  for (const [what, ok] of verdicts) console.log(`${ok ? "met   " : "MISSED"}  ${what}`);
}

/** Redis memory of one service's instances (its three keys) and its share of the namespace's service index. */
async function memoryPerInstance(redis: Redis, serviceIds: string[], instances: number) {
  const usage = async (key: string) => Number(await redis.call("MEMORY", "USAGE", key, "SAMPLES", "0"));
  let bytes = 0;
  for (const id of serviceIds) {
    for (const kind of ["svc_itc", "svc_meta", "svc_ttl"]) bytes += await usage(`{bench}:${kind}:${id}`);
  }
  const index = await usage("{bench}:svc_idx");
  return (bytes + index) / instances;
}

async function scalePart() {
  const PER_SERVICE = 1000;
  const STEP = SCALE / 10;
  const redis = await startBenchRedis();
  const client = new Redis(redis.url);
  const gateway = await startServer("apps/main.ts", { REDIS_URL: redis.url }, PROFILE_DIR);
  try {
    const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await client.info("memory"))![1]);
    const memoryBefore = await usedMemory();
    const url = `${services(gateway.url)}/svc-0/instances`; // the service segment is replaced per instance
    // warm-up (JIT) in another namespace, so that the first tenth measures the same process as the last
    await load(url.replace(NS, "%7Bwarm-up%7D"), { seconds: 3, script: "wrk-registry.lua", env: { BENCH_MODE: "REGISTER", BENCH_SPREAD: "1000", BENCH_TTL: TTL } });
    // wrk runs for a time, not a count: short runs of new instances each, grouped by the tenth of SCALE they start in.
    const runs: { before: number; rps: number; p99: number }[] = [];
    for (let offset = 0; offset < SCALE; ) {
      const env = { BENCH_MODE: "REGISTER", BENCH_SERVICE: "svc", BENCH_PER_SERVICE: String(PER_SERVICE), BENCH_OFFSET: String(offset), BENCH_TTL: TTL };
      const s = await load(url, { seconds: 1, script: "wrk-registry.lua", env });
      runs.push({ before: offset, rps: s.rps, p99: s.p99 });
      offset += s.requests; // requests still in flight at the end are sent again by the next run: a harmless re-registration
    }
    const steps = Array.from({ length: 10 }, (_, i) => runs.filter((x) => Math.floor(x.before / STEP) === i)).map((xs) => ({
      rps: xs.length ? xs.reduce((n, x) => n + x.rps, 0) / xs.length : 0,
      p99: Math.max(...xs.map((x) => x.p99)),
    }));
    // Service stats are the stats job's counts (up to one 10 s period old): count what list-instances answers instead.
    const serviceIds = (await (await fetch(services(gateway.url))).json()) as string[];
    const counts: { serviceId: string; instanceCount: number }[] = [];
    for (const serviceId of serviceIds) {
      counts.push({ serviceId, instanceCount: ((await (await fetch(`${services(gateway.url)}/${serviceId}/instances`)).json()) as unknown[]).length });
    }
    const total = counts.reduce((n, c) => n + c.instanceCount, 0);
    const perInstance = await memoryPerInstance(client, counts.map((c) => c.serviceId), total);
    const perInstanceInfo = ((await usedMemory()) - memoryBefore) / total;

    const listUrl = `${services(gateway.url)}/svc-0/instances`;
    // wrk builds a request it never sends when a run starts, so a run's first instance may be missing: fill svc-0 up.
    const hosts = new Set(((await (await fetch(listUrl)).json()) as { host: string }[]).map((i) => i.host));
    for (let k = 0; k < PER_SERVICE; k++) {
      if (!hosts.has(`h${k}`)) await put(listUrl, { schema: "http", host: `h${k}`, port: 8080, weight: 1, ttl: TTL, metadata: { zone: "a", version: "1.4.2" } });
    }
    const size = ((await (await fetch(listUrl)).json()) as unknown[]).length;
    if (size !== PER_SERVICE) throw new Error(`list-instances of svc-0 answered ${size} instances, not ${PER_SERVICE}`);
    const one = await load(listUrl, { seconds: 10, script: "wrk-registry.lua", connections: 1 });
    const loaded = await load(listUrl, { seconds: 5, script: "wrk-registry.lua" });

    console.log(`\nScale on Redis: ${fmt(total)} live instances in one namespace (${counts.length} services of up to ${fmt(PER_SERVICE)}), registered through`);
    console.log(`the gateway with wrk -t1 -c32 in 1 s runs of new instances, grouped per ${fmt(STEP)} (ttl ${TTL}, two metadata entries).\n`);
    console.log("| instances before | register req/s (mean of the runs) | p99 (worst run) |");
    console.log("|---|---|---|");
    for (const [i, s] of steps.entries()) if (s.rps > 0) console.log(`| ${fmt(i * STEP)} | ${fmt(s.rps)} | ${s.p99.toFixed(1)} ms |`);
    const rates = steps.map((s) => s.rps).filter((r) => r > 0);
    const flat = Math.min(...rates) / Math.max(...rates);
    console.log(`\nslowest step / fastest step: ${flat.toFixed(2)}; last step / first step: ${(rates[rates.length - 1] / rates[0]).toFixed(2)}`);
    console.log(`Redis memory per instance: ${perInstance.toFixed(0)} B (MEMORY USAGE of the service keys + index share), ${perInstanceInfo.toFixed(0)} B (used_memory growth / instances)`);
    console.log(`list-instances of a ${fmt(size)}-instance service: one at a time ${fmt(one.rps)} req/s, p50 ${one.p50.toFixed(2)} ms, p99 ${one.p99.toFixed(2)} ms; -c32 ${fmt(loaded.rps)} req/s, p99 ${loaded.p99.toFixed(1)} ms`);
    console.log(`\n${one.p99 < 20 ? "met   " : "MISSED"}  list-instances of a 1,000-instance service p99 < 20 ms (one call at a time)`);
  } finally {
    await stop(gateway);
    client.disconnect();
    await redis.stop();
  }
}

if (PART !== "scale") await hotPart();
if (PART !== "hot") await scalePart();
process.exit(0);
