import { create } from "@bufbuild/protobuf";
import { ListValueSchema, ValueSchema, type ListValue } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import type { RegistryStore, TopologyEdge, TopologyStore } from "@gov/registry-service";
import { callerOf } from "@gov/security-service";
import { checkNamespace, CLOCK_SKEW_ALLOWANCE_MS, isValidNamespace, type NamespaceRule } from "@gov/service-kit";
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

/**
 * The edges of `namespace` seen after `since` whose consumer and producer are services that existed when the edge was
 * last seen: a service deleted, or a namespace deleted with its services, leaves its edges behind (in every namespace
 * that discovered it) until they age out, which is a day by default — listed meanwhile, they showed a dependency on
 * something gone, and once a service of the same name was created again, on the new one, which nobody had discovered.
 * A producer in another namespace is `{ns}.{serviceId}`, and both may hold dots: it counts when some reading of it names
 * such a service. One read of each namespace's services involved.
 */
async function liveEdges(deps: Pick<StatsServiceDeps, "topology" | "registry" | "namespaceRule">, namespace: string, since: number): Promise<TopologyEdge[]> {
  const edges = await deps.topology.edges(namespace, since);
  if (edges.length === 0) return edges;
  const indexes = new Map<string, Promise<Map<string, number>>>();
  const servicesOf = (ns: string) => {
    let births = indexes.get(ns);
    if (!births) indexes.set(ns, (births = deps.registry.listServiceBirths(ns)));
    return births;
  };
  const own = await servicesOf(namespace);
  /**
   * Whether `serviceId` of `births` existed when `seen` (a service created before births were kept counts 0). Its birth
   * and the sighting may come from two hosts' clocks: a birth up to the clocks' allowance later still counts.
   */
  const existedAt = (births: Map<string, number>, serviceId: string, seen: number) => {
    const born = births.get(serviceId);
    return born !== undefined && born <= seen + CLOCK_SKEW_ALLOWANCE_MS;
  };
  const producerExisted = async (producer: string, seen: number): Promise<boolean> => {
    if (existedAt(own, producer, seen)) return true;
    for (let dot = producer.indexOf("."); dot > 0; dot = producer.indexOf(".", dot + 1)) {
      const ns = producer.slice(0, dot);
      if (ns !== namespace && isValidNamespace(ns, deps.namespaceRule) && existedAt(await servicesOf(ns), producer.slice(dot + 1), seen)) return true;
    }
    return false;
  };
  const kept = await Promise.all(edges.map(async (e) => existedAt(own, e.consumer, e.lastSeen) && (await producerExisted(e.producer, e.lastSeen))));
  return edges.filter((_, i) => kept[i]);
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
