/**
 * What `gov.redis.min-replicas=1` costs a config PUT: the all-in-one process on a local Redis Cluster of 3 masters and
 * 3 replicas, without the setting (the baseline: the write is answered once the master has it) and with it (each write
 * also waits, in a group-committed WAIT on its own connection, until a replica has it). wrk -c32 through the REST
 * gateway, rows interleaved over BENCH_ROUNDS rounds of BENCH_SECONDS; every PUT writes a new version. GET rows show
 * that reads do not pay for it (they do not share the writes' connection).
 */
import { startRedisCluster } from "@gov/testkit";
import { configRowCells, CONFIG, CONNECTIONS, DURATION, loadConfig, measure, NS, ROUNDS, startServer, stop } from "./fixtures/wrk-servers.js";

async function main() {
  const cluster = await startRedisCluster(3, { replicas: 1 });
  const path = `/v1/namespaces/${NS}/configs/app.yaml`;
  let results: Awaited<ReturnType<typeof measure>> = [];
  try {
    const plain = await startServer("apps/main.ts", { REDIS_URL: cluster.url });
    const durable = await startServer("apps/main.ts", { REDIS_URL: cluster.url, GOV_REDIS_MIN_REPLICAS: "1" });
    const servers = [plain, durable];
    try {
      for (const s of servers) {
        await fetch(s.url + path, { method: "PUT", body: CONFIG });
        await loadConfig(s.url + path, "GET", 2); // warm-up: JIT and caches
        await loadConfig(s.url + path, "PUT", 2);
      }
      const redisPids = cluster.pids;
      const off = "min-replicas 0 (master only)";
      results = await measure([
        { name: off, url: plain.url + path, method: "GET", baseline: off, pids: [plain.child.pid!, ...redisPids] },
        { name: "min-replicas 1 (WAIT)", url: durable.url + path, method: "GET", baseline: off, pids: [durable.child.pid!, ...redisPids] },
        { name: off, url: plain.url + path, method: "PUT", baseline: off, pids: [plain.child.pid!, ...redisPids] },
        { name: "min-replicas 1 (WAIT)", url: durable.url + path, method: "PUT", baseline: off, pids: [durable.child.pid!, ...redisPids] },
      ]);
    } finally {
      await Promise.all(servers.map(stop));
    }
  } finally {
    await cluster.stop();
  }
  console.log(`Config over REST on a 3-master / 3-replica Redis Cluster: wrk -t1 -c${CONNECTIONS}, ${ROUNDS} rounds of ${DURATION} s`);
  console.log("per row, each next to its baseline (medians; ratio = median of the pairs' ratios to min-replicas 0). CPU/req counts the gateway and all six Redis nodes.\n");
  console.log("| gov.redis.min-replicas | request | req/s | p99 | ratio vs 0 | CPU/req | CPU ratio | ratio per pair |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const r of results) console.log(`| ${configRowCells(r).join(" | ")} |`);
}

await main();
