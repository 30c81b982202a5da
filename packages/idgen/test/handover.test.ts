import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { MachineLease, manualDistributor, parseSnowflake, SnowflakeId } from "../src/index.js";
import { captureLogs, shiftableClock, uniqueNamespace } from "./helpers.js";
import { killWorker, spawnWorker, type Worker } from "./spawn-worker.js";

const skip = inject("redisSkipReason");
const redisUrl = inject("redisUrl");
const dir = mkdtempSync(join(tmpdir(), "idgen-handover-"));
const running = new Set<Worker>();
const BURST = 64; // ids per hold, as in fixtures/handover-worker.ts
const LAYOUT = { epoch: 1577203200000, timestampBit: 41, machineBit: 1, sequenceBit: 12 };
afterAll(async () => {
  await Promise.all([...running].map(killWorker));
  rmSync(dir, { recursive: true, force: true });
});

/**
 * "Ids are never reused" across an immediate release → re-acquire: the new owner of a machine id must issue nothing
 * until its clock is strictly past the last millisecond the previous owner could have used — also when it runs on a
 * host whose clock is a few ms behind. Three workers share two machine ids, so every release is taken over at once.
 */
async function handOver(skews: number[], rounds: number): Promise<{ ids: number; handOvers: number; duplicates: number }> {
  const ns = uniqueNamespace("handover");
  const workers = skews.map((skew, i) => {
    const out = join(dir, `${ns}-${i}.bin`);
    const w = spawnWorker("handover-worker.ts", [redisUrl, ns, String(rounds), String(skew), out]);
    running.add(w);
    return { w, out };
  });
  await Promise.all(workers.map(({ w }) => w.waitFor("READY")));
  for (const { w } of workers) w.child.stdin!.end("go\n");
  await Promise.all(workers.map(({ w }) => w.waitFor("DONE", 120_000)));
  await Promise.all(workers.map(async ({ w }) => (expect(await w.exited).toBe(0), running.delete(w))));
  const seen = new Set<bigint>();
  let ids = 0;
  let duplicates = 0;
  // each worker's file holds its rounds in order, BURST ids each: (machine id, first tick, worker) per round
  const holds: { machineId: number; tick: number; worker: number }[] = [];
  workers.forEach(({ out }, worker) => {
    const b = readFileSync(out);
    const all = new BigUint64Array(b.buffer, b.byteOffset, b.byteLength / 8);
    for (let i = 0; i < all.length; i++) {
      const id = all[i];
      ids++;
      if (seen.has(id)) duplicates++;
      seen.add(id);
      if (i % BURST === 0) {
        const p = parseSnowflake(id, LAYOUT);
        holds.push({ machineId: p.machineId, tick: p.timestamp, worker });
      }
    }
  });
  // a hand-over: the next hold of the same machine id is by another worker
  holds.sort((a, b) => a.machineId - b.machineId || a.tick - b.tick);
  let handOvers = 0;
  for (let i = 1; i < holds.length; i++) if (holds[i].machineId === holds[i - 1].machineId && holds[i].worker !== holds[i - 1].worker) handOvers++;
  return { ids, handOvers, duplicates };
}

describe.skipIf(skip)("machine id hand-over between processes", () => {
  it("same clock: thousands of immediate release → re-acquire hand-overs issue no id twice", async () => {
    const r = await handOver([0, 0, 0], 1_000);
    expect(r.ids).toBe(3 * 1_000 * BURST);
    expect(r.handOvers).toBeGreaterThan(1_000);
    expect(r.duplicates).toBe(0);
  }, 180_000);

  it("skewed clocks (hosts 3 ms and 7 ms behind): the new owner waits until it is past the releaser's last millisecond", async () => {
    const r = await handOver([0, -3, -7], 700);
    expect(r.ids).toBe(3 * 700 * BURST);
    expect(r.handOvers).toBeGreaterThan(500);
    expect(r.duplicates).toBe(0);
  }, 180_000);
});

describe("hand-over in one process (manual distributor, clock steps)", () => {
  it("a release records the latest tick the generators used, even one ahead of the wall clock, and the next owner starts after it", async () => {
    const clock = shiftableClock();
    const distributor = manualDistributor(3);
    const opts = { namespace: "local", instanceId: "a", machineBit: 4, distributor, autoRenew: false, clock, logger: captureLogs().logger };
    const first = await MachineLease.acquire(opts);
    const g1 = new SnowflakeId({ machine: first, layout: { machineBit: 4 }, clock, logger: opts.logger });
    clock.shift(40); // the clock steps forward: ids are issued in a tick 40 ms ahead of what it will show later
    const before = Array.from({ length: 100 }, () => g1.nextId());
    clock.shift(-40); // ... and back
    await first.revert();
    const second = await MachineLease.acquire({ ...opts, instanceId: "b" });
    const g2 = new SnowflakeId({ machine: second, layout: { machineBit: 4 }, clock, logger: opts.logger });
    const after = Array.from({ length: 100 }, () => g2.nextId());
    const layout = { ...g1.layout };
    expect(parseSnowflake(after[0], layout).timestamp).toBeGreaterThan(parseSnowflake(before[99], layout).timestamp);
    expect(new Set([...before, ...after]).size).toBe(200);
  });
});
