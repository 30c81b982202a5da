/**
 * `npm run bench import`: ZIP import through the REST gateway (multipart upload over HTTP) — a 1,000-entry, 10 MiB
 * archive on the embedded store and on Redis, and hostile archives at the 16 MiB upload cap (refused). Each scenario
 * runs in a fresh process so that its peak RSS is its own; it reports time, peak RSS (sampled every 2 ms) over the
 * baseline just before the upload, and the longest event-loop stall. Default limits. Starts (and stops) its own redis-server.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { deflateRawSync } from "node:zlib";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { createMemoryConfigStore, createRedisConfigStore } from "@gov/config-service";
import { connectRedis } from "@gov/redis";
import { startRedis } from "@gov/testkit";
import { createTestGateway, TEST_LIMITS } from "../gateway/test/harness.js";
import { floodZip, multipart, overlappingZip, rawZip, zeroBomb } from "../gateway/test/zip-fixtures.js";

const MiB = 1024 * 1024;
const LIMITS = { ...TEST_LIMITS, maxContentBytes: MiB, maxZipBytes: 16 * MiB, maxZipEntries: 1000, maxZipUncompressedBytes: 64 * MiB };

/** 1,000 configs of ~10 KiB of varied text each: ~10 MiB uncompressed. */
function typicalArchive(): Buffer {
  const entries = Array.from({ length: 1000 }, (_, i) => {
    const lines = Array.from({ length: 200 }, (_, j) => `key.${i}.${j}: value-${(i * 7919 + j * 104729) % 1_000_003}-${"abcdefghij".slice(j % 10)}\n`);
    return { name: `service-${i % 50}/config-${i}.yaml`, data: lines.join("").slice(0, 10_240) };
  });
  return rawZip(entries);
}

/** 1,000 configs of base64 text (~13.7 KB each) that deflate barely shrinks: a 10 MiB archive. */
function denseArchive(): Buffer {
  return rawZip(Array.from({ length: 1000 }, (_, i) => ({ name: `dense/config-${i}.txt`, data: randomBytes(10_240).toString("base64") })));
}

const SCENARIOS: Record<string, { what: string; archive: () => Buffer; redis?: boolean }> = {
  typical: { what: "1,000 entries, 10 MiB of YAML (embedded)", archive: typicalArchive },
  "typical-redis": { what: "1,000 entries, 10 MiB of YAML (Redis)", archive: typicalArchive, redis: true },
  dense: { what: "1,000 entries, 10 MiB archive (embedded)", archive: denseArchive },
  "dense-redis": { what: "1,000 entries, 10 MiB archive (Redis)", archive: denseArchive, redis: true },
  "bomb-declared": { what: "16 MiB → 16 GiB bomb, declaring 4 GiB", archive: () => rawZip([{ name: "bomb", compressed: zeroBomb(15_800 * MiB), declaredSize: 0xfffffffe, crc: 0 }]) },
  "bomb-lying": { what: "16 MiB → 16 GiB bomb declaring 1 KiB", archive: () => rawZip([{ name: "bomb", compressed: zeroBomb(15_800 * MiB), declaredSize: 1024, crc: 0 }]) },
  overlap: { what: "1,000 overlapping records on 16 MiB of data", archive: () => overlappingZip(1000, deflateRawSync(randomBytes(16 * MiB - 200_000)), 60_000) },
  flood: { what: "190,000 empty entries in 16 MiB", archive: () => floodZip(190_000, (i) => i.toString(36)) },
};

async function runScenario(name: string): Promise<void> {
  const scenario = SCENARIOS[name];
  const redis = scenario.redis ? await startRedis() : undefined;
  const store = redis ? await createRedisConfigStore(await connectRedis(redis.url), { maxVersions: 100, kind: "redis" }) : createMemoryConfigStore({ maxVersions: 100 });
  const gw = await createTestGateway(store, LIMITS);
  try {
    const { url } = await gw.listen();
    const archive = scenario.archive();
    const { payload, headers } = multipart(archive);
    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    let peak = rssBefore;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 2);
    const histogram = monitorEventLoopDelay({ resolution: 10 });
    histogram.enable();
    const start = performance.now();
    const r = await fetch(`${url}/v1/namespaces/%7Bbench%7D/configs`, { method: "POST", body: payload, headers });
    const body = (await r.json()) as { code?: string; message?: string; succeeded?: number; total?: number };
    const ms = performance.now() - start;
    histogram.disable();
    clearInterval(sampler);
    peak = Math.max(peak, process.memoryUsage().rss);
    const outcome = r.ok ? `${body.succeeded}/${body.total} written` : `${r.status} ${body.code}: ${body.message?.slice(0, 70)}`;
    console.log(
      `| ${scenario.what} | ${(archive.length / MiB).toFixed(1)} MiB | ${ms.toFixed(0)} ms | ${((peak - rssBefore) / MiB).toFixed(0)} MB (peak ${(peak / MiB).toFixed(0)} MB) | ${(histogram.max / 1e6 - 10).toFixed(0)} ms | ${outcome} |`,
    );
  } finally {
    await gw.close();
    await redis?.stop();
  }
}

const only = process.argv[2];
if (only && SCENARIOS[only]) {
  await runScenario(only);
} else {
  console.log("| archive | upload | time to answer | peak RSS over baseline | longest stall | answer |");
  console.log("| --- | --- | --- | --- | --- | --- |");
  const self = fileURLToPath(import.meta.url);
  for (const name of Object.keys(SCENARIOS)) {
    const r = spawnSync(process.execPath, [...process.execArgv, "--expose-gc", self, name], { stdio: "inherit" });
    if (r.status !== 0) process.exitCode = 1;
  }
}
