import { setImmediate } from "node:timers/promises";
import type { ConfigStore } from "@gov/config-service";
import type { RegistryStore, TopologyStore } from "@gov/registry-service";
import type { NamespaceStat, StatsStore } from "../stats/stats-store.js";

/** The namespaces a pass visits: every indexed one, and the current context namespace (seed: always kept in the list). */
export interface NamespaceSource {
  list(): Promise<string[]>;
  current(): Promise<string>;
}

export interface StatsPassDeps {
  namespaces: NamespaceSource;
  registry: Pick<RegistryStore, "sweep" | "sweptStats">;
  configs: Pick<ConfigStore, "count">;
  topology: Pick<TopologyStore, "prune">;
  stats: Pick<StatsStore, "write" | "retain">;
  /** gov.topology.edge-ttl: edges last seen longer ago are pruned. */
  edgeTtlMs: number;
  now: () => number;
  /** Namespaces counted at once (default 16): a pass over many namespaces overlaps their round trips. */
  concurrency?: number;
  /** Aborted when the worker loses the mutex or stops: the pass ends at the next namespace. */
  signal?: AbortSignal;
  /**
   * Whether this worker may still write (it holds the `stat` mutex): asked right before each write, so that a pass
   * whose mutex lapsed while it waited on a read (a suspended process resumed after another worker took over) does not
   * store what it read before over that worker's newer counts. Default: always.
   */
  mayWrite?: () => boolean;
  /**
   * When this pass was due (epoch ms): stored with each namespace's counts, so that a write from an older pass (one
   * that resumed after another worker's newer pass) never replaces newer counts, even if it slips past `mayWrite`
   * (checked here, sent a moment later).
   */
  passAt?: number;
}

export interface PassResult {
  namespaces: number;
  /** Expired instances the sweep removed. */
  expired: number;
  /** Live instances counted, over every namespace. */
  instances: number;
  /** Edges pruned for age. */
  prunedEdges: number;
  durationMs: number;
}

/** Namespaces visited between two turns given to other work. */
const YIELD_EVERY = 64;

/**
 * One run of the statistics job: for each namespace, sweep expired instances (which records each service's live
 * count), prune stale topology edges, count configs (one counter), then store the namespace's stat. Per namespace that is four
 * sequential round trips on Redis whatever its size: the service index, the pipelined sweep scripts, the counts
 * (swept stats, config index and the prune, sent together) and the write.
 */
export async function runStatsPass(deps: StatsPassDeps): Promise<PassResult> {
  const started = performance.now();
  const now = deps.now();
  const [indexed, current] = await Promise.all([deps.namespaces.list(), deps.namespaces.current()]);
  const all = [...new Set([...indexed, current])];
  const result: PassResult = { namespaces: all.length, expired: 0, instances: 0, prunedEdges: 0, durationMs: 0 };

  const mayWrite = () => !deps.signal?.aborted && deps.mayWrite?.() !== false;
  const visit = async (ns: string) => {
    if (!mayWrite()) return;
    // every write of the pass is checked right before it is sent (a pause may have come between any two of them)
    const expired = await deps.registry.sweep(ns, now, mayWrite); // (not `+= await`: lanes would overwrite each other's sums)
    result.expired += expired;
    const prune = mayWrite() ? deps.topology.prune(ns, now - deps.edgeTtlMs) : 0;
    const [services, configs, pruned] = await Promise.all([deps.registry.sweptStats(ns), deps.configs.count(ns), prune]);
    const instances = services.reduce((sum, s) => sum + s.instanceCount, 0);
    const stat: NamespaceStat = {
      namespaces: all.length,
      services: { total: services.length, health: services.filter((s) => s.instanceCount > 0).length },
      instances,
      configs,
    };
    // read before a pause that outlasted the mutex, these counts may be older than another worker's: not written then
    if (!mayWrite()) return;
    await deps.stats.write(ns, stat, deps.passAt, deps.now());
    result.instances += instances;
    result.prunedEdges += pruned;
  };

  // An in-memory store answers without giving the event loop a turn: 2,000 namespaces were one 30 ms block. Every
  // YIELD_EVERY visits, all lanes wait for one turn together (a lane waiting alone leaves the others running).
  let next = 0;
  let visited = 0;
  let turn: Promise<void> | undefined;
  const lane = async () => {
    while (next < all.length && !deps.signal?.aborted) {
      await visit(all[next++]);
      if (++visited % YIELD_EVERY === 0) turn ??= setImmediate().then(() => void (turn = undefined));
      if (turn) await turn;
    }
  };
  await Promise.all(Array.from({ length: Math.min(deps.concurrency ?? 16, all.length) }, lane));
  // a namespace deleted since the last pass keeps no stale counts
  if (mayWrite()) await deps.stats.retain(all);
  result.durationMs = Math.round(performance.now() - started);
  return result;
}
