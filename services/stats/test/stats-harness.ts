import { createMemoryConfigStore, createConfigModule, createRedisConfigStore } from "@gov/config-service";
import { restGateway } from "@gov/gateway";
import { connectRedis } from "@gov/redis";
import { createMemoryRegistryStore, createMemoryTopologyStore, createRedisRegistryStore, createRedisTopologyStore, createRegistryModule } from "@gov/registry-service";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { redisTargets } from "@gov/testkit";
import { createStatsModule } from "../src/module.js";
import { createMemoryStatsStore, createRedisStatsStore, type StatsStore } from "../src/stats/stats-store.js";
import type { WorkerTiming } from "../src/worker/run-worker.js";
import type { StatsStores } from "../src/worker/stores.js";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

/** The namespaces a test's worker visits: the ones the test adds. */
export interface TestNamespaces {
  add(ns: string): string;
  remove(ns: string): void;
}

/** The stores on each target: embedded, Redis, Redis Cluster (each with a skip reason when Redis is unavailable). */
export function statsTargets(): { name: string; skip: string; open: () => Promise<StatsStores & TestNamespaces> }[] {
  // A system namespace per test file (the last pass time and the stat index live there): files run side by side on the
  // shared Redis servers.
  const system = `gov-{sys${process.pid}}`;
  const namespaces = () => {
    const set = new Set<string>();
    return {
      namespaces: { list: async () => [...set], current: async () => system },
      system,
      add: (ns: string) => (set.add(ns), ns),
      remove: (ns: string) => void set.delete(ns),
    };
  };
  return [
    {
      name: "embedded",
      skip: "",
      open: async () => {
        const registry = createMemoryRegistryStore();
        const topology = createMemoryTopologyStore(async (ns, id) => (await registry.listServices(ns)).includes(id));
        return { registry, topology, configs: createMemoryConfigStore({ maxVersions: 10 }), stats: createMemoryStatsStore(), ...namespaces() };
      },
    },
    ...redisTargets().map((t) => ({
      name: t.name,
      skip: t.skip,
      open: async () => {
        const client = await connectRedis(t.url);
        return {
          registry: await createRedisRegistryStore(await connectRedis(t.url), { kind: t.name }),
          configs: await createRedisConfigStore(await connectRedis(t.url), { maxVersions: 10, kind: t.name }),
          topology: createRedisTopologyStore(client),
          stats: { ...createRedisStatsStore(client, system, t.name), close: async () => void client.disconnect() },
          ...namespaces(),
        };
      },
    })),
  ];
}

/** Settings as the environment would give them, for a test process. */
/** The stats store alone on each store kind, for tests of its write rules (`label` tells their system namespaces apart). */
export function statsStoreTargets(label: string): { name: string; skip: string; open: () => Promise<{ store: StatsStore; close: () => void }> }[] {
  return [
    { name: "embedded", skip: "", open: async () => ({ store: createMemoryStatsStore(), close: () => {} }) },
    ...redisTargets().map((t) => ({
      name: t.name,
      skip: t.skip,
      open: async () => {
        const c = await connectRedis(t.url);
        return { store: createRedisStatsStore(c, `gov-{${label}${process.pid}x${seq++}}`), close: () => c.disconnect() };
      },
    })),
  ];
}

export const testSources = (env: Record<string, string> = {}) => ({ file: {}, env: { GOV_SHUTDOWN_GRACE: "3s", ...env } });

/** A short period for tests: a pass every 300 ms, the first 100 ms after start. */
export const FAST: WorkerTiming = { initialDelayMs: 100, periodMs: 300, tickMs: 50 };

/**
 * The all-in-one process (REST gateway, config, registry and stats modules) on `stores`; the registry and the stats
 * reads share `now` when given (a test clock).
 */
export async function startStatsProcess(stores: StatsStores, options: { timing?: WorkerTiming; now?: () => number; env?: Record<string, string> } = {}): Promise<BuiltProcess> {
  const timing = { ...FAST, ...options.timing, now: options.now };
  return buildProcess({
    name: "test-stats",
    modules: [
      createConfigModule({ store: stores.configs }),
      createRegistryModule({ store: stores.registry, topology: stores.topology, now: options.now }),
      createStatsModule({ stores, worker: timing, now: options.now }),
    ],
    gateway: restGateway,
    sources: testSources(options.env),
    logger,
  });
}

let seq = 0;
/** A fresh, valid namespace per test. */
export const freshNamespace = (label = "") => `${label}{st${process.pid}x${Date.now().toString(36)}x${seq++}}`;
/** A namespace as one path segment. */
export const seg = (s: string) => encodeURIComponent(s);
