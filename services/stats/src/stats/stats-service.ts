import { setImmediate } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { ListValueSchema, ValueSchema, type ListValue } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import type { RegistryStore, TopologyEdge, TopologyStore } from "@gov/registry-service";
import { callerOf } from "@gov/security-service";
import { checkNamespace, CLOCK_SKEW_ALLOWANCE_MS, MAX_NAMESPACE_LENGTH, type NamespaceRule } from "@gov/service-kit";
import { visibleNamespaces } from "../namespaces/namespace-service.js";
import type { NamespaceSource } from "../worker/stats-pass.js";
import { EMPTY_STAT, type StatsStore } from "./stats-store.js";

export interface StatsServiceDeps {
  stats: Pick<StatsStore, "read">;
  topology: Pick<TopologyStore, "edges">;
  /** The services of a namespace: an edge whose consumer or producer was deleted since is not listed. */
  registry: Pick<RegistryStore, "listServiceBirths">;
  /** The namespace index: a caller who may not read every namespace is told how many it may read. */
  namespaces: Pick<NamespaceSource, "list">;
  namespaceRule: NamespaceRule;
  /** gov.topology.edge-ttl: older edges are not listed (the worker prunes them). */
  edgeTtlMs: number;
  now?: () => number;
}

const strings = (values: string[]): ListValue =>
  create(ListValueSchema, { values: values.map((value) => create(ValueSchema, { kind: { case: "stringValue", value } })) });

/** Producers whose readings are worked out between two turns given to other work. */
const YIELD_EVERY = 256;

/**
 * The edges of `namespace` seen after `since` whose consumer and producer are services that existed when the edge was
 * last seen: a service deleted, or a namespace deleted with its services, leaves its edges behind (in every namespace
 * that discovered it) until they age out, which is a day by default — listed meanwhile, they showed a dependency on
 * something gone, and once a service of the same name was created again, on the new one, which nobody had discovered.
 * A producer in another namespace is `{ns}.{serviceId}`, and both may hold dots: it counts when some reading of it names
 * such a service. One read of each namespace's services involved.
 *
 * A producer is read once per distinct name, not once per edge, and only at dots that end an indexed namespace (no
 * namespace is longer than MAX_NAMESPACE_LENGTH): every dot of every edge used to be tried as a namespace, a refused one
 * building a whole error, and every valid-looking prefix cost a store read. 10,000 edges to producers since deleted,
 * named `{ns}.p1: . . .` (100 dots), held the event loop 4.4 s on every read of the topology (10 s with a producer
 * namespace holding 200 dots before its tag), and producers with distinct dotted names had the store asked about as
 * many namespaces, none of which exists.
 */
async function liveEdges(deps: Pick<StatsServiceDeps, "topology" | "registry" | "namespaces">, namespace: string, since: number): Promise<TopologyEdge[]> {
  const edges = await deps.topology.edges(namespace, since);
  if (edges.length === 0) return edges;
  const indexes = new Map<string, Promise<Map<string, number>>>();
  const servicesOf = (ns: string) => {
    let births = indexes.get(ns);
    if (!births) {
      indexes.set(ns, (births = deps.registry.listServiceBirths(ns)));
      births.catch(() => {}); // read ahead, awaited below: a failure then answers the call, never the process
    }
    return births;
  };
  const own = await servicesOf(namespace);
  // A namespace that holds services is indexed (from before its first service is written until after its last is gone).
  const indexed = edges.some((e) => e.producer.includes(".")) ? new Set(await deps.namespaces.list()) : new Set<string>();
  /** Each distinct producer's readings in other namespaces, `[ns, serviceId]`; their namespaces' services are read at once. */
  const readings = new Map<string, [string, string][]>();
  for (const { producer } of edges) {
    if (readings.has(producer)) continue;
    const splits: [string, string][] = [];
    // (from the first dot on, even at 0: a namespace may start with one, as `.{x}` does, and its edges were never listed)
    for (let dot = producer.indexOf("."); dot >= 0 && dot <= MAX_NAMESPACE_LENGTH; dot = producer.indexOf(".", dot + 1)) {
      const ns = producer.slice(0, dot);
      if (ns === namespace || !indexed.has(ns)) continue;
      splits.push([ns, producer.slice(dot + 1)]);
      void servicesOf(ns);
    }
    readings.set(producer, splits);
    if (readings.size % YIELD_EVERY === 0) await setImmediate();
  }
  const services = new Map<string, Map<string, number>>();
  await Promise.all([...indexes].map(async ([ns, births]) => services.set(ns, await births)));
  /** The earliest birth among a producer's readings (its own service's, or that of `{serviceId}` in `{ns}`). */
  const earliestBirth = (producer: string): number | undefined => {
    let earliest = own.get(producer);
    for (const [ns, serviceId] of readings.get(producer)!) {
      const born = services.get(ns)!.get(serviceId);
      if (born !== undefined && (earliest === undefined || born < earliest)) earliest = born;
    }
    return earliest;
  };
  const births = new Map([...readings.keys()].map((producer) => [producer, earliestBirth(producer)]));
  /**
   * Whether a service born at `born` existed when `seen` (a service created before births were kept counts 0). Its birth
   * and the sighting may come from two hosts' clocks: a birth up to the clocks' allowance later still counts.
   */
  const existedAt = (born: number | undefined, seen: number) => born !== undefined && born <= seen + CLOCK_SKEW_ALLOWANCE_MS;
  return edges.filter((e) => existedAt(own.get(e.consumer), e.lastSeen) && existedAt(births.get(e.producer), e.lastSeen));
}

/** Reads only: the stat the worker stored for the namespace, and the namespace's live topology edges. */
export function createStatsService(deps: StatsServiceDeps): ServiceImpl<typeof StatsService> {
  const now = deps.now ?? Date.now;
  return {
    async getStat(req, ctx) {
      checkNamespace(req.namespace, deps.namespaceRule);
      // A namespace no pass has counted yet (new, or created less than one period ago) answers zeros for its own
      // counts; `namespaces` is the server's whatever the namespace (it said 0 beside a list of 13).
      const stat = (await deps.stats.read(req.namespace)) ?? EMPTY_STAT;
      // The pass counts every namespace; a caller that may read only some of them (not an admin, security on) is told
      // how many it may read, as GET /v1/namespaces lists them. Admins and security off keep the pass's count, with no
      // round trip of their own.
      const caller = callerOf(ctx);
      if (stat !== EMPTY_STAT && (caller === undefined || caller.admin)) return stat;
      return { ...stat, namespaces: visibleNamespaces(await deps.namespaces.list(), ctx).length };
    },
    async getTopology(req) {
      checkNamespace(req.namespace, deps.namespaceRule);
      const producers = new Map<string, string[]>();
      for (const e of await liveEdges(deps, req.namespace, now() - deps.edgeTtlMs)) {
        const list = producers.get(e.consumer);
        if (list) list.push(e.producer);
        else producers.set(e.consumer, [e.producer]);
      }
      const consumers: Record<string, ListValue> = {};
      for (const consumer of [...producers.keys()].sort()) consumers[consumer] = strings(producers.get(consumer)!.sort());
      return { consumers };
    },
  };
}
