/**
 * `npm run bench idgen`: our Snowflake against the theoretical 4,096 ids/ms and @sapphire/snowflake, our segment
 * chain (memory and Redis distributors) against an INCR-per-id Redis baseline — all in the same run, on the
 * same machine. Starts (and stops) its own redis-server. Bounded to well under a minute.
 */
import { Snowflake as SapphireSnowflake } from "@sapphire/snowflake";
import { connectRedis } from "@gov/redis";
import { startRedis } from "@gov/testkit";
import { pino } from "pino";
import {
  CompositeIdGenerator,
  IDGEN_EPOCH,
  memorySegmentDistributor,
  redisSegmentDistributor,
  SafeSnowflakeId,
  SegmentChainId,
  SegmentExhaustedError,
  SnowflakeId,
  type SegmentDistributor,
} from "@gov/idgen";

const logger = pino({ level: "warn" });
const RUN_MS = 2_000;

/** Calls `fn` in batches until `ms` elapsed; returns ids per ms. */
function measureSync(fn: () => unknown, ms = RUN_MS): number {
  for (let i = 0; i < 200_000; i++) fn(); // warm-up (JIT)
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let i = 0; i < 4096; i++) fn();
    n += 4096;
    now = performance.now();
  }
  return n / (now - start);
}

async function measureChain(distributor: SegmentDistributor, step: number): Promise<number> {
  const chain = await SegmentChainId.create({ distributor, step, safeDistance: 10, logger });
  const take = async (count: number) => {
    for (let i = 0; i < count; i++) {
      try {
        chain.nextId();
      } catch (err) {
        if (!(err instanceof SegmentExhaustedError)) throw err;
        await chain.nextIdAsync();
      }
    }
  };
  await take(2_000_000); // warm-up, and lets hunger expansion size the prefetch
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < RUN_MS) {
    await take(100_000);
    n += 100_000;
    now = performance.now();
  }
  chain.stop();
  return n / (now - start);
}

const fmt = (x: number, d = 0) => x.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });

const server = await startRedis();
const redis = await connectRedis(server.url);
try {
  const rows: [string, string, string][] = [];

  const snowflake = new SnowflakeId({ machine: 1, logger });
  const sfPerMs = measureSync(() => snowflake.nextId());
  const safe = new SafeSnowflakeId({ machine: 1, logger });
  const safePerMs = measureSync(() => safe.nextId());
  const sapphire = new SapphireSnowflake(IDGEN_EPOCH);
  const sapphirePerMs = measureSync(() => sapphire.generate());
  // uniqueness at full speed: 1,000,000 ids in a tight loop from each
  const dupes = (gen: () => bigint) => {
    const ids = new BigUint64Array(1_000_000);
    for (let i = 0; i < ids.length; i++) ids[i] = gen();
    ids.sort();
    let d = 0;
    for (let i = 1; i < ids.length; i++) if (ids[i] === ids[i - 1]) d++;
    return d;
  };
  const sapphireDupes = dupes(() => sapphire.generate());
  const ourDupes = dupes(() => snowflake.nextId());
  const composite = new CompositeIdGenerator({ machine: 1, logger });
  const compositePerMs = measureSync(() => composite.nextIdAsString());

  const memPerMs = await measureChain(memorySegmentDistributor({ namespace: "bench", name: "mem" }), 1000);
  await redis.del("idgen:{bench}:segment:redis");
  const redisChainPerMs = await measureChain(redisSegmentDistributor(redis, { namespace: "bench", name: "redis" }), 1000);

  // baseline: one INCR round trip per id (sequential), and with 64 in flight (what a pipelining client gets)
  await redis.del("bench:incr");
  let incr = 0;
  let start = performance.now();
  while (performance.now() - start < RUN_MS) {
    await redis.incr("bench:incr");
    incr++;
  }
  const incrPerMs = incr / (performance.now() - start);
  incr = 0;
  start = performance.now();
  while (performance.now() - start < RUN_MS) {
    await Promise.all(Array.from({ length: 64 }, () => redis.incr("bench:incr")));
    incr += 64;
  }
  const incrPipePerMs = incr / (performance.now() - start);

  rows.push(["Snowflake 41/10/12 (bigint), 1 generator", `${fmt(sfPerMs * 1000)} ids/s = ${fmt(sfPerMs)} ids/ms`, `${fmt((sfPerMs / 4096) * 100, 1)}% of 4,096/ms; ${fmt(sfPerMs / sapphirePerMs, 2)}× @sapphire/snowflake; ${ourDupes} duplicates in 1 M`]);
  rows.push(["SafeSnowflake 41/3/9 (number)", `${fmt(safePerMs * 1000)} ids/s`, `${fmt((safePerMs / 512) * 100, 1)}% of 512/ms`]);
  rows.push(["@sapphire/snowflake 3.5.5 generate()", `${fmt(sapphirePerMs * 1000)} ids/s`, `no per-ms cap (its 12-bit increment wraps within a ms): ${fmt(sapphireDupes)} duplicates in 1 M`]);
  rows.push(["Composite string (15 chars)", `${fmt(compositePerMs * 1000)} ids/s`, `${fmt((compositePerMs / 65_536) * 100, 1)}% of 65,536/ms (string building bound)`]);
  rows.push(["Segment chain, memory distributor, step 1000", `${fmt(memPerMs * 1000)} ids/s`, `${fmt((memPerMs * 1000) / 20e6, 2)}× the 20 M/s target; ${fmt(memPerMs / incrPerMs)}× INCR-per-id`]);
  rows.push(["Segment chain, Redis INCRBY distributor, step 1000", `${fmt(redisChainPerMs * 1000)} ids/s`, `${fmt((redisChainPerMs * 1000) / 20e6, 2)}× the 20 M/s target; ${fmt(redisChainPerMs / incrPerMs)}× INCR-per-id`]);
  rows.push(["Redis INCR per id (sequential await)", `${fmt(incrPerMs * 1000)} ids/s`, "baseline"]);
  rows.push(["Redis INCR per id (64 in flight)", `${fmt(incrPipePerMs * 1000)} ids/s`, `${fmt(incrPipePerMs / incrPerMs, 1)}× sequential`]);

  console.log(`node ${process.version}, ${RUN_MS} ms per measurement\n`);
  console.log("| Generator | Throughput | Ratio |\n|---|---|---|");
  for (const r of rows) console.log(`| ${r.join(" | ")} |`);
  const ok = sfPerMs / 4096 >= 0.85 && memPerMs * 1000 >= 20e6;
  console.log(`\nTargets (Snowflake ≥ 85% of 4,096/ms, segment chain ≥ 20 M/s in memory): ${ok ? "met" : "NOT met"}`);
} finally {
  redis.disconnect();
  await server.stop();
}
