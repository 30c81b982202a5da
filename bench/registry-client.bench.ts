/**
 * Discovery through the registry client's cache against a remote ListInstances call (issue #7 target: the cache is
 * at least 1,000× faster). The registry runs as its own process (the all-in-one process from the sources, on the
 * embedded store, then on Redis); one service has 10 instances. Remote: sequential Connect calls over HTTP/1.1 with
 * keep-alive, as a service would make them. Cache: `await client.instances()` and `await client.choose()` in a loop,
 * after the watch's first answer.
 *
 * BENCH_REMOTE_CALLS (default 3,000) and BENCH_CACHE_CALLS (default 1,000,000) size the run.
 */
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { createRegistryClient } from "@gov/registry-client";
import { startRedis } from "@gov/testkit";
import { startServer, stop } from "./fixtures/http-bench.js";

const REMOTE_CALLS = Number(process.env.BENCH_REMOTE_CALLS ?? 3_000);
const CACHE_CALLS = Number(process.env.BENCH_CACHE_CALLS ?? 1_000_000);
const NS = "{bench}";

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];

async function measure(store: string, env: Record<string, string>): Promise<void> {
  // the all-in-one process from the sources
  const server = await startServer("apps/main.ts", env);
  const { url } = server;
  try {
    const remote = createClient(RegistryService, createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
    for (let port = 1; port <= 10; port++) {
      await remote.registerInstance({ namespace: NS, serviceId: "order", schema: "http", host: "10.0.0.1", port, weight: port % 3, isEphemeral: false, metadata: { zone: "a" } });
    }

    for (let i = 0; i < 300; i++) await remote.listInstances({ namespace: NS, serviceId: "order" }); // warm-up
    const remoteUs: number[] = [];
    for (let i = 0; i < REMOTE_CALLS; i++) {
      const t = performance.now();
      const { instances } = await remote.listInstances({ namespace: NS, serviceId: "order" });
      remoteUs.push((performance.now() - t) * 1000);
      if (instances.length !== 10) throw new Error(`expected 10 instances, got ${instances.length}`);
    }
    remoteUs.sort((a, b) => a - b);
    const remoteMean = remoteUs.reduce((a, b) => a + b, 0) / remoteUs.length;

    const client = createRegistryClient({ baseUrl: url, namespace: NS, serviceId: "bench" });
    if ((await client.instances("order")).length !== 10) throw new Error("the cache did not load 10 instances");
    const timeLoop = async (fn: () => Promise<unknown>) => {
      for (let i = 0; i < 10_000; i++) await fn(); // warm-up
      const t = performance.now();
      for (let i = 0; i < CACHE_CALLS; i++) await fn();
      return ((performance.now() - t) * 1000) / CACHE_CALLS; // µs per call
    };
    const instancesUs = await timeLoop(() => client.instances("order"));
    const chooseUs = await timeLoop(() => client.choose("order"));
    await client.close();

    const row = (name: string, us: number) => `| ${store} | ${name} | ${us < 1 ? `${(us * 1000).toFixed(0)} ns` : `${us.toFixed(1)} µs`} | ${(remoteMean / us).toFixed(0)}× |`;
    console.log(row("ListInstances, remote (mean; p50 " + percentile(remoteUs, 0.5).toFixed(0) + " µs, p99 " + percentile(remoteUs, 0.99).toFixed(0) + " µs)", remoteMean));
    console.log(row("client.instances(), cache", instancesUs));
    console.log(row("client.choose(), cache", chooseUs));
    const worst = Math.min(remoteMean / instancesUs, remoteMean / chooseUs);
    console.log(`| ${store} | target ≥ 1,000× | ${worst >= 1000 ? "met" : "NOT met"} (${worst.toFixed(0)}×) | |`);
  } finally {
    await stop(server);
  }
}

console.log("| store | call | time per call | vs remote |\n|---|---|---|---|");
await measure("embedded", { REDIS_URL: "" });
const redis = await startRedis();
try {
  await measure("redis", { REDIS_URL: redis.url });
} finally {
  await redis.stop();
}
process.exit(0);
