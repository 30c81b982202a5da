// CPU per request of the split shape — a gateway calling the config and registry services over HTTP, on one Redis —
// next to the all-in-one process in the same rounds: the inputs of the capacity model in deploy/README.md.
//   npm run build && NODE_OPTIONS=--conditions=@gov/source npx tsx deploy/capacity/split-cost.ts
// Needs wrk and redis-server. BENCH_ROUNDS (2) and BENCH_SECONDS (4) size it; CPU time is read from /proc per process,
// so the figures hold up on a busy host better than req/s do (which are printed too, for what they are worth).
import { startRedis } from "@gov/testkit";
import { CONFIG, fmt, load, loadConfig, median, NS, startServer, stop, type Sample, type Server } from "../../bench/fixtures/wrk-servers.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const configPath = `/v1/namespaces/${NS}/configs/app.yaml`;
const instancesPath = `/v1/namespaces/${NS}/services/reg/instances`;
const registry = (mode: "REGISTER" | "RENEW") => ({ script: "wrk-registry.lua", env: { BENCH_MODE: mode, BENCH_SERVICE: "reg", BENCH_SPREAD: "1000", BENCH_TTL: "3600s" } });

const redis = await startRedis();
const servers: Server[] = [];
try {
  const own = (name: string) => ({ REDIS_URL: redis.url, [`GOV_${name}_SERVICE_PORT`]: "0", [`GOV_${name}_SERVICE_GRPC_PORT`]: "0" });
  const config = await startServer("services/config/dist/main.js", own("CONFIG"), false, "dist");
  const registryService = await startServer("services/registry/dist/main.js", own("REGISTRY"), false, "dist");
  const gateway = await startServer("apps/dist/main.js", { REDIS_URL: redis.url, GOV_CONFIG_SERVICE_URL: config.url, GOV_REGISTRY_SERVICE_URL: registryService.url }, false, "dist");
  const allInOne = await startServer("apps/dist/main.js", { REDIS_URL: redis.url }, false, "dist");
  servers.push(config, registryService, gateway, allInOne);
  const [c, r, g, a, rs] = [config, registryService, gateway, allInOne].map((s) => s.child.pid!).concat(redis.pid!);

  for (const s of [gateway, allInOne]) {
    const res = await fetch(s.url + configPath, { method: "PUT", body: CONFIG });
    if (!res.ok) throw new Error(`PUT config: ${res.status} ${await res.text()}`);
    await loadConfig(s.url + configPath, "GET", 2); // warm-up
    await load(s.url + instancesPath, { seconds: 2, ...registry("REGISTER") }); // the 1,000 instances renewals cycle through
  }
  const rows: { name: string; run: () => Promise<Sample>; parts: string[] }[] = [
    { name: "config GET, split (gateway → config service)", run: () => loadConfig(gateway.url + configPath, "GET", SECONDS, [g, c, rs]), parts: ["gateway", "config service", "Redis"] },
    { name: "config GET, all-in-one", run: () => loadConfig(allInOne.url + configPath, "GET", SECONDS, [a, rs]), parts: ["process", "Redis"] },
    { name: "renew, split (gateway → registry service)", run: () => load(gateway.url + instancesPath, { seconds: SECONDS, pids: [g, r, rs], ...registry("RENEW") }), parts: ["gateway", "registry service", "Redis"] },
    { name: "renew, all-in-one", run: () => load(allInOne.url + instancesPath, { seconds: SECONDS, pids: [a, rs], ...registry("RENEW") }), parts: ["process", "Redis"] },
  ];
  const samples = rows.map(() => [] as Sample[]);
  for (let round = 0; round < ROUNDS; round++) for (const [i, row] of rows.entries()) samples[i].push(await row.run());

  console.log(`\n${ROUNDS} rounds of ${SECONDS} s, wrk -t1 -c32, medians; CPU µs per request by process\n`);
  console.log("| request | req/s | p99 | CPU/req total | by process |");
  console.log("|---|---|---|---|---|");
  for (const [i, row] of rows.entries()) {
    const s = samples[i];
    const parts = row.parts.map((p, k) => `${p} ${fmt(median(s.map((x) => x.cpuParts[k])))}`).join(", ");
    console.log(`| ${row.name} | ${fmt(median(s.map((x) => x.rps)))} | ${median(s.map((x) => x.p99)).toFixed(1)} ms | ${fmt(median(s.map((x) => x.cpu)))} µs | ${parts} |`);
  }
} finally {
  for (const s of servers) await stop(s);
  await redis.stop();
}
