/**
 * The statistics job and topology recording.
 *
 * 1. One stats pass (`runStatsPass`, as the worker runs it) on a fresh redis-server over 100 namespaces × 50 services ×
 *    N instances, for N = 5 and N = 20 (25,000 and 100,000 instances; a tenth of them expired, so the first pass
 *    sweeps them). It reports each pass's duration, how it grows with N, and the Redis round trips per namespace: the
 *    socket writes of one pass run one namespace at a time (with lanes the writes of several namespaces coalesce) and
 *    the commands Redis processed (INFO stats).
 * 2. Discovery over REST (`GET …/services/B/instances`, wrk -c32) on the all-in-one process on Redis, with and without
 *    `X-Gov-Consumer: A`, interleaved in the same run: the ratio is the cost of recording the topology.
 *
 * BENCH_SECONDS (default 4) and BENCH_ROUNDS (default 5) size part 2; BENCH_STATS_SIZES (default "5,20") part 1.
 */
import { createRedisConfigStore } from "@gov/config-service";
import { connectRedis, type RedisClient } from "@gov/redis";
import type { HandlerContext } from "@connectrpc/connect";
import { createRedisRegistryStore, createRedisTopologyStore, createTopologyRecorder, type InstanceRecord, type RegistryStore } from "@gov/registry-service";
import { createRedisStatsStore, runStatsPass } from "@gov/stats-service";
import { startRedis } from "@gov/testkit";
import { load, median, startServer } from "./fixtures/http-bench.js";

const NAMESPACES = 100;
const SERVICES = 50;
const SIZES = (process.env.BENCH_STATS_SIZES ?? "5,20").split(",").map(Number).filter((n) => n > 0); // "0": skip part 1
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

const instance = (serviceId: string, i: number, ttlAt: number): InstanceRecord => ({
  instanceId: `${serviceId}@http#10.0.${i >> 8}.${i & 255}#8080`,
  serviceId,
  schema: "http",
  host: `10.0.${i >> 8}.${i & 255}`,
  port: 8080,
  weight: 1,
  isEphemeral: true,
  ttlAt,
  ttlMs: 600_000,
  metadata: { zone: "a" },
});

/** Registers every instance (a tenth of them already expired at `now`), a namespace's services at once. */
async function populate(registry: RegistryStore, namespaces: string[], perService: number, now: number) {
  for (const ns of namespaces) {
    const writes: Promise<void>[] = [];
    for (let s = 0; s < SERVICES; s++) {
      for (let i = 0; i < perService; i++) writes.push(registry.register(ns, instance(`svc${s}`, i, i % 10 === 0 ? now - 1 : now + 600_000), now - 2));
    }
    await Promise.all(writes);
  }
}

/** Counts the writes on the client's socket (one per round trip, or per batch of pipelined commands). */
function countWrites(client: RedisClient): () => number {
  const stream = (client as unknown as { stream: { write: (...args: unknown[]) => boolean } }).stream;
  const original = stream.write.bind(stream);
  let writes = 0;
  stream.write = (...args: unknown[]) => {
    writes++;
    return original(...args);
  };
  return () => writes;
}

const commandsProcessed = async (client: RedisClient) => Number(/total_commands_processed:(\d+)/.exec(await client.info("stats"))![1]);

async function statsPass(perService: number) {
  const redis = await startRedis();
  try {
    const client = await connectRedis(redis.url);
    const registry = await createRedisRegistryStore(await connectRedis(redis.url), { kind: "redis" });
    const configs = await createRedisConfigStore(await connectRedis(redis.url), { maxVersions: 10, kind: "redis" });
    const namespaces = Array.from({ length: NAMESPACES }, (_, i) => `{bench${i}}`);
    const now = Date.now();
    let started = performance.now();
    await populate(registry, namespaces, perService, now);
    const populateMs = performance.now() - started;
    // the pass on its own client, so its socket writes are its round trips
    const passClient = await connectRedis(redis.url);
    const deps = {
      namespaces: { list: async () => namespaces, current: async () => namespaces[0] },
      registry: await createRedisRegistryStore(passClient, { kind: "redis" }),
      configs,
      topology: createRedisTopologyStore(passClient),
      stats: createRedisStatsStore(passClient, "gov-{system}"),
      edgeTtlMs: 86_400_000,
      now: () => now,
    };
    const writes = countWrites(passClient);
    const results = [];
    for (const label of ["first (sweeps)", "second", "third"]) {
      const [w0, c0] = [writes(), await commandsProcessed(client)];
      started = performance.now();
      const r = await runStatsPass(deps);
      results.push({ label, ms: performance.now() - started, expired: r.expired, instances: r.instances, writes: writes() - w0, commands: (await commandsProcessed(client)) - c0 - 1 });
    }
    const [w0] = [writes()];
    await runStatsPass({ ...deps, concurrency: 1 });
    const sequentialWrites = (writes() - w0) / NAMESPACES;
    for (const c of [client, passClient]) c.disconnect();
    await registry.close();
    await configs.close();
    return { perService, total: NAMESPACES * SERVICES * perService, populateMs, results, sequentialWrites };
  } finally {
    await redis.stop();
  }
}

/**
 * One wrk run; requests per second, p99 (ms) and the gateway's CPU per request (µs), which a host shared with other
 * work disturbs much less than req/s.
 */
const wrk = (url: string, headers: string[], pid: number) => load(url, { seconds: SECONDS, script: "wrk-report.lua", headers, pids: [pid] });

async function discovery() {
  const redis = await startRedis();
  try {
    const gw = await startServer("apps/main.ts", { REDIS_URL: redis.url });
    const ns = "%7Bbench%7D";
    const put = (path: string, body?: unknown) =>
      fetch(`${gw.url}/v1/namespaces/${ns}/services/${path}`, { method: "PUT", ...(body ? { body: JSON.stringify(body), headers: { "content-type": "application/json" } } : {}) });
    await put("A");
    for (let i = 0; i < 3; i++) await put("B/instances", { schema: "http", host: `10.0.0.${i}`, port: 8080, isEphemeral: false });
    const url = `${gw.url}/v1/namespaces/${ns}/services/B/instances`;
    type Row = { rps: number; p99: number; cpu: number };
    const rows: { without: Row; with: Row }[] = [];
    const pid = gw.child.pid!;
    for (let round = 0; round < ROUNDS; round++) rows.push({ without: await wrk(url, [], pid), with: await wrk(url, ["X-Gov-Consumer: A"], pid) });
    const topology = (await (await fetch(`${gw.url}/v1/namespaces/${ns}/stat/topology`)).json()) as unknown;
    gw.child.kill("SIGTERM");
    return { rows, topology };
  } finally {
    await redis.stop();
  }
}

const fmt = (n: number, d = 0) => n.toFixed(d);

/** What recording costs a discovery call in the handler itself: the recorder alone, a million calls, µs per call. */
function recorderCost(): { anonymous: number; identified: number } {
  const recorder = createTopologyRecorder({ store: { touch: async () => true, edges: async () => [], prune: async () => 0, close: async () => {} }, namespaceRule: { requireHashTag: true }, now: Date.now });
  const time = (headers: Record<string, string>) => {
    const ctx = { requestHeader: new Headers(headers) } as unknown as HandlerContext;
    const n = 1_000_000;
    const started = performance.now();
    for (let i = 0; i < n; i++) recorder.discovered(ctx, "{bench}", "B", true);
    return ((performance.now() - started) * 1000) / n;
  };
  time({ "x-gov-consumer": "A" }); // warm up
  return { anonymous: time({}), identified: time({ "x-gov-consumer": "A" }) };
}

console.log(`stats pass: ${NAMESPACES} namespaces × ${SERVICES} services × N instances on redis-server (a tenth expired)`);
const passes = [];
for (const n of SIZES) {
  const p = await statsPass(n);
  passes.push(p);
  console.log(`\nN = ${n} (${p.total.toLocaleString("en")} instances; populated in ${fmt(p.populateMs / 1000, 1)} s)`);
  console.log("| pass | ms | expired swept | live counted | socket writes / ns | commands / ns |");
  console.log("|---|---|---|---|---|---|");
  for (const r of p.results) console.log(`| ${r.label} | ${fmt(r.ms)} | ${r.expired} | ${r.instances} | ${fmt(r.writes / NAMESPACES, 1)} | ${fmt(r.commands / NAMESPACES, 1)} |`);
  console.log(`round trips per namespace, one namespace at a time: ${fmt(p.sequentialWrites, 1)}`);
}
if (passes.length > 1) {
  const [a, b] = [passes[0], passes.at(-1)!];
  console.log(`\ngrowth: ${b.total / a.total}× the instances → first pass ${fmt(b.results[0].ms / a.results[0].ms, 2)}×, steady pass ${fmt(b.results[2].ms / a.results[2].ms, 2)}× the time`);
}

console.log(`\ndiscovery (GET …/services/B/instances, 3 instances, wrk -c32 ${SECONDS} s × ${ROUNDS} rounds, all-in-one on Redis)`);
const d = await discovery();
const without = median(d.rows.map((r) => r.without.rps));
const withHeader = median(d.rows.map((r) => r.with.rps));
const ratio = median(d.rows.map((r) => r.with.rps / r.without.rps));
const cpuRatio = median(d.rows.map((r) => r.with.cpu / r.without.cpu));
console.log("| request | req/s | p99 ms | gateway CPU/req |");
console.log("|---|---|---|---|");
console.log(`| without X-Gov-Consumer | ${fmt(without)} | ${fmt(median(d.rows.map((r) => r.without.p99)), 2)} | ${fmt(median(d.rows.map((r) => r.without.cpu)))} µs |`);
console.log(`| with X-Gov-Consumer: A | ${fmt(withHeader)} | ${fmt(median(d.rows.map((r) => r.with.p99)), 2)} | ${fmt(median(d.rows.map((r) => r.with.cpu)))} µs |`);
console.log(`with/without (medians of per-round ratios): req/s ${fmt(ratio, 3)}, CPU per request ${fmt(cpuRatio, 3)} — target (within 5 %): ${ratio >= 0.95 || cpuRatio <= 1.05 ? "met" : "NOT met"}`);
const cost = recorderCost();
console.log(`the recorder in the handler: ${fmt(cost.anonymous, 3)} µs per anonymous call, ${fmt(cost.identified, 3)} µs per identified call (after the first write of the minute)`);
console.log(`topology after the run: ${JSON.stringify(d.topology)}`);
process.exit(0);
