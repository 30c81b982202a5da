import { connectRedis, type RedisClient } from "@gov/redis";
import { createLogger } from "@gov/service-kit";
import { redisTargets } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createMemoryStatsStore, createRedisStatsStore } from "../src/stats/stats-store.js";
import { alwaysHeldMutex, redlockMutex } from "../src/worker/stat-mutex.js";
import type { PassResult } from "../src/worker/stats-pass.js";
import { startStatsWorker } from "../src/worker/stats-worker.js";
import { runWorker } from "../src/worker/run-worker.js";
import type { StatsStores } from "../src/worker/stores.js";
import { createMemoryRegistryStore, createMemoryTopologyStore } from "@gov/registry-service";
import type { ModuleContext } from "@gov/service-kit";
import { statsStoreTargets } from "./stats-harness.js";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
const DONE: PassResult = { namespaces: 0, expired: 0, instances: 0, prunedEdges: 0, durationMs: 0 };
let seq = 0;
const mutexKey = () => `gov-{mx${process.pid}x${seq++}}:mutex:stat`;
/** A worker on `stores` that takes the redlock mutex (1 s ttl) on `redis`: its first pass at once, the next a minute on. */
const runMutexWorker = (redis: RedisClient, stores: StatsStores) =>
  runWorker({ logger, redis } as unknown as ModuleContext, { mutexEnabled: true, edgeTtl: 60_000 } as never, stores, { initialDelayMs: 0, periodMs: 60_000, tickMs: 50, mutexTtlMs: 1000 });

describe("the stats store: counts of an older pass never replace a newer pass's", () => {
  const targets = statsStoreTargets("sw");
  const stat = (configs: number) => ({ namespaces: 2, services: { total: 1, health: 1 }, instances: 3, configs });
  for (const t of targets) {
    it.skipIf(t.skip)(`on the ${t.name} store`, async () => {
      const { store, close } = await t.open();
      try {
        const n = `{sw${process.pid}x${seq++}}`;
        await store.write(n, stat(8), 20_000); // the worker that took over
        await store.write(n, stat(7), 10_000); // the suspended one, resumed: read before the other's pass
        expect(await store.read(n)).toEqual(stat(8));
        await store.write(n, stat(9), 30_000); // the next pass
        expect(await store.read(n)).toEqual(stat(9));
        await store.write(n, stat(10)); // no pass time: replaces (and forgets it)
        await store.write(n, stat(11), 1);
        expect(await store.read(n)).toEqual(stat(11));
        await store.forget(n, 40_000); // deleted at 40 s: a pass due before reads zeros…
        await store.write(n, stat(12), 35_000);
        expect(await store.read(n)).toBeUndefined();
        await store.write(n, stat(13), 50_000); // …and one due after (created again) counts afresh
        expect(await store.read(n)).toEqual(stat(13));
      } finally {
        close();
      }
    });
  }
});

describe("a clock running ahead (a worker an hour fast ran a pass, then died)", () => {
  const HOUR = 3_600_000;
  const stat = (configs: number) => ({ namespaces: 1, services: { total: 0, health: 0 }, instances: 0, configs });
  const targets = statsStoreTargets("sk");
  for (const t of targets) {
    it.skipIf(t.skip)(`its counts are replaced by the next pass's on the ${t.name} store (they stayed an hour)`, async () => {
      const { store, close } = await t.open();
      try {
        const n = `{sk${process.pid}x${seq++}}`;
        const now = Date.now();
        await store.write(n, stat(1), now + HOUR, now + HOUR); // by the fast host's clock
        await store.write(n, stat(2), now + 10_000, now + 10_000); // the next holder's pass, by a right clock
        expect(await store.read(n)).toEqual(stat(2));
        // a pass recorded within the hosts' allowance ahead still wins over an older one (a suspended worker's)
        await store.write(n, stat(3), now + 20_500, now + 20_000);
        await store.write(n, stat(4), now + 10_000, now + 20_000);
        expect(await store.read(n)).toEqual(stat(3));
      } finally {
        close();
      }
    });
  }

  it("the next holder paces its passes from now, not from the pass recorded in its future (it waited the hour)", async () => {
    const passes = createMemoryStatsStore();
    await passes.setLastPassAt(Date.now() + HOUR);
    const started: number[] = [];
    const worker = startStatsWorker({
      mutex: alwaysHeldMutex(),
      passes,
      logger,
      initialDelayMs: 0,
      periodMs: 200,
      tickMs: 20,
      runPass: async () => (started.push(Date.now()), DONE),
    });
    try {
      await vi.waitFor(() => expect(started.length).toBeGreaterThanOrEqual(2), { timeout: 3000, interval: 20 });
      expect(await passes.lastPassAt()).toBeLessThanOrEqual(Date.now());
    } finally {
      await worker.stop();
    }
  });
});

describe("a clock set back an hour under a holder (NTP stepping a fast clock back)", () => {
  it("passes go on from now: the pass it ran by the old time does not hold the next an hour", async () => {
    let offset = 3_600_000;
    const started: number[] = [];
    const worker = startStatsWorker({
      mutex: alwaysHeldMutex(),
      passes: createMemoryStatsStore(),
      logger,
      initialDelayMs: 0,
      periodMs: 200,
      tickMs: 20,
      now: () => Date.now() + offset,
      runPass: async () => (started.push(Date.now()), DONE),
    });
    try {
      await vi.waitFor(() => expect(started.length).toBeGreaterThanOrEqual(1), { timeout: 3000, interval: 20 });
      offset = 0;
      const before = started.length;
      await vi.waitFor(() => expect(started.length).toBeGreaterThanOrEqual(before + 2), { timeout: 3000, interval: 20 });
    } finally {
      await worker.stop();
    }
  });
});

describe("the statistics schedule", () => {
  it("first pass after the initial delay, then one per period, never two at once", async () => {
    const passes: { start: number; end: number }[] = [];
    const worker = startStatsWorker({
      mutex: alwaysHeldMutex(),
      passes: createMemoryStatsStore(),
      logger,
      initialDelayMs: 100,
      periodMs: 200,
      tickMs: 20,
      runPass: async () => {
        const start = Date.now();
        await new Promise((r) => setTimeout(r, 250)); // longer than the period: the next one waits
        passes.push({ start, end: Date.now() });
        return DONE;
      },
    });
    const started = Date.now();
    await vi.waitFor(() => expect(passes.length).toBeGreaterThanOrEqual(3), { timeout: 5000, interval: 20 });
    await worker.stop();
    expect(passes[0].start - started).toBeGreaterThanOrEqual(90);
    for (let i = 1; i < passes.length; i++) expect(passes[i].start).toBeGreaterThanOrEqual(passes[i - 1].end);
  });
});

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`the stat mutex on ${target.name}`, () => {
    const clients: RedisClient[] = [];
    const client = async () => {
      const c = await connectRedis(target.url);
      clients.push(c);
      return c;
    };
    beforeAll(async () => void (await client()));
    afterAll(() => clients.forEach((c) => c.disconnect()));

    it("one holder at a time; released at stop, taken by the next asker at once; expires when its holder stops extending", async () => {
      const key = mutexKey();
      const a = redlockMutex(await client(), { key, ttlMs: 1000, logger });
      const bLines: Record<string, unknown>[] = [];
      const b = redlockMutex(await client(), { key, ttlMs: 1000, logger: createLogger("b", "info", { write: (line: string) => void bLines.push(JSON.parse(line)) }) });
      expect(await a.hold()).toBe(true);
      expect(await b.hold()).toBe(false);
      await new Promise((r) => setTimeout(r, 1500)); // past the ttl: a's extensions keep it
      expect(await b.hold()).toBe(false);
      expect(await a.hold()).toBe(true);
      await a.release();
      expect(await b.hold()).toBe(true);
      // b's lock deleted behind its back (as after a Redis failover): its next extension fails and it says so
      await clients[0].del(key);
      expect(await a.hold()).toBe(true);
      await vi.waitFor(() => expect(b.lost.aborted).toBe(true), { timeout: 2000, interval: 20 });
      // an expected event (a failover, an outage): one warning with the reason, without redlock's stack
      const lost = bLines.filter((l) => String(l.msg).startsWith("lost the stat mutex"));
      expect(lost).toHaveLength(1);
      expect(lost[0]).toMatchObject({ level: 40, error: { type: expect.any(String), message: expect.any(String) } });
      expect(JSON.stringify(lost[0])).not.toContain("stack");
      expect(await b.hold()).toBe(false);
      await a.release();
    });

    it("reads as held all through its extensions, however the checks interleave with them", async () => {
      // redlock zeroes the extended lock's expiration a few promise steps before it hands back the new lock: checks in
      // that gap (a pass's, between its Redis calls) read "not held", and a complete pass skipped those namespaces
      const c = await client();
      // extended every 400 ms: a stall of the event loop or of Redis shorter than 800 ms cannot lose it (a ttl of 450 ms,
      // extended every 150 ms, was lost to a stall of the test process past 300 ms: CI's two loaded cores stalled one
      // past 500 ms); checked for 3 s, about as many extensions as before
      const m = redlockMutex(c, { key: mutexKey(), ttlMs: 1200, logger });
      try {
        expect(await m.hold()).toBe(true);
        let checks = 0;
        let notHeld = 0;
        const until = Date.now() + 3000;
        // lanes of Redis calls, each behind a different number of async layers, as a pass's calls are
        const wrapped = async (depth: number): Promise<unknown> => (depth === 0 ? c.ping() : wrapped(depth - 1));
        const lane = async (depth: number) => {
          while (Date.now() < until) {
            await wrapped(depth);
            checks++;
            if (!m.holds()) notHeld++;
          }
        };
        await Promise.all(Array.from({ length: 12 }, (_, i) => lane(i)));
        expect(checks).toBeGreaterThan(1000);
        expect(notHeld).toBe(0);
        expect(await m.hold()).toBe(true);
      } finally {
        await m.release();
      }
    });

    it("two workers in one schedule: each period run by exactly one, without overlap, paced by the last pass in Redis", async () => {
      const key = mutexKey();
      const system = `gov-{mxs${process.pid}x${seq++}}`;
      const passes: { worker: string; due: number; start: number; end: number }[] = [];
      const start = async (name: string) =>
        startStatsWorker({
          mutex: redlockMutex(await client(), { key, ttlMs: 5000, logger }), // longer than the test waits for a takeover: only a release allows it
          passes: createRedisStatsStore(await client(), system),
          logger,
          initialDelayMs: 50,
          periodMs: 400,
          tickMs: 50,
          runPass: async (_signal, due) => {
            const begun = Date.now();
            await new Promise((r) => setTimeout(r, 30));
            passes.push({ worker: name, due, start: begun, end: Date.now() });
            return DONE;
          },
        });
      const [one, two] = [await start("one"), await start("two")];
      await vi.waitFor(() => expect(passes.length).toBeGreaterThanOrEqual(4), { timeout: 8000, interval: 20 });
      const holder = passes[0].worker;
      await (holder === "one" ? one : two).stop(); // releases the mutex: the other takes over at its next tick
      const stoppedAt = Date.now();
      await vi.waitFor(() => expect(passes.some((p) => p.worker !== holder)).toBe(true), { timeout: 3000, interval: 20 });
      await (holder === "one" ? two : one).stop();
      for (let i = 1; i < passes.length; i++) {
        expect(passes[i].start).toBeGreaterThanOrEqual(passes[i - 1].end);
        // due every period exactly (fixed rate), whichever worker holds the mutex; each starts once it is due
        expect(passes[i].due - passes[i - 1].due).toBeGreaterThanOrEqual(400);
        expect(passes[i].start).toBeGreaterThanOrEqual(passes[i].due);
      }
      // released at stop: the other takes over at the next due pass, not after the lock's ttl (plus slack for a busy host)
      expect(passes.find((p) => p.worker !== holder)!.start - stoppedAt).toBeLessThan(400 + 1000);
    });
    it("a worker suspended while it reads a namespace's service list sweeps and prunes nothing there once it resumes", async () => {
      const system = `gov-{mxs${process.pid}x${seq++}}`;
      const key = `${system}:mutex:stat`;
      const redis = await client();
      const registry = createMemoryRegistryStore();
      const topology = createMemoryTopologyStore(async () => true);
      let release!: () => void;
      let blocked = false;
      const sent: string[] = [];
      const stores: StatsStores = {
        registry: {
          ...registry,
          kind: "redis",
          // the Redis store's sweep: the service list read, then (guard permitting) the deletions sent
          sweep: async (ns: string, now: number, mayWrite?: () => boolean) => {
            if (ns === "{slow}") {
              blocked = true;
              await new Promise<void>((r) => (release = r)); // suspended while the service list is in flight
            }
            if (mayWrite?.() === false) return 0;
            sent.push(`sweep ${ns}`);
            return registry.sweep(ns, now);
          },
        },
        configs: { count: async () => 0 } as unknown as StatsStores["configs"],
        topology: { ...topology, prune: async (ns: string, before: number) => (sent.push(`prune ${ns}`), topology.prune(ns, before)) },
        stats: createMemoryStatsStore(),
        namespaces: { list: async () => ["{fresh}", "{slow}"], current: async () => system },
        system,
      };
      const worker = runMutexWorker(redis, stores);
      try {
        await vi.waitFor(() => expect(blocked).toBe(true), { timeout: 5000, interval: 10 });
        vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 10_000 }); // the pause, past the lock's ttl
        await redis.del(key);
        const other = redlockMutex(await client(), { key, ttlMs: 1000, logger });
        expect(await other.hold()).toBe(true);
        release();
        for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
        // {fresh} was visited before the pause; nothing of {slow}'s was sent beside the worker that took over
        expect(sent.filter((s) => s.endsWith("{slow}"))).toEqual([]);
        expect(sent).toContain("sweep {fresh}");
        await other.release();
      } finally {
        vi.useRealTimers();
        release?.();
        await worker.stop();
      }
    });

    it("a worker suspended mid-pass past the lock's ttl (SIGSTOP, VM pause) writes nothing it read before, once another worker holds the mutex", async () => {
      const system = `gov-{mxp${process.pid}x${seq++}}`;
      const key = `${system}:mutex:stat`;
      const redis = await client();
      const registry = createMemoryRegistryStore();
      await registry.putService("{fresh}", "s");
      await registry.putService("{slow}", "s");
      const stats = createMemoryStatsStore();
      let release!: () => void;
      let blocked = false;
      const stores: StatsStores = {
        // the embedded store's data, but a Redis kind: the worker takes the redlock mutex
        registry: { ...registry, kind: "redis" },
        configs: {
          count: async (ns: string) => {
            if (ns !== "{slow}") return 0;
            blocked = true;
            await new Promise<void>((r) => (release = r)); // the process is suspended while this read is in flight
            return 7; // what it read before the pause
          },
        } as unknown as StatsStores["configs"],
        topology: createMemoryTopologyStore(async () => true),
        stats,
        namespaces: { list: async () => ["{fresh}", "{slow}"], current: async () => system },
        system,
      };
      const worker = runMutexWorker(redis, stores);
      try {
        await vi.waitFor(() => expect(blocked).toBe(true), { timeout: 5000, interval: 10 });
        // The pause: the wall clock moves past the lock's ttl while none of this process's timers run (its extender
        // neither extended nor failed yet), and another worker takes the expired mutex and counts {slow} afresh.
        vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 10_000 });
        await redis.del(key); // expired in Redis meanwhile
        const other = redlockMutex(await client(), { key, ttlMs: 1000, logger });
        expect(await other.hold()).toBe(true);
        await stats.write("{slow}", { namespaces: 3, services: { total: 1, health: 0 }, instances: 0, configs: 8 }, Date.now());
        // the process resumes: its read answers first
        release();
        for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
        expect((await stats.read("{slow}"))?.configs).toBe(8); // not the 7 read before the pause
        await other.release();
      } finally {
        vi.useRealTimers();
        release?.();
        await worker.stop();
      }
    });
  });
}
