import { create } from "@bufbuild/protobuf";
import { ListValueSchema, ValueSchema, type ListValue } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import type { TopologyStore } from "@gov/registry-service";
import { checkNamespace, type NamespaceRule } from "@gov/service-kit";
import { EMPTY_STAT, type StatsStore } from "./stats-store.js";

export interface StatsServiceDeps {
  stats: Pick<StatsStore, "read">;
  topology: Pick<TopologyStore, "edges">;
  namespaceRule: NamespaceRule;
  /** gov.topology.edge-ttl: older edges are not listed (the worker prunes them). */
  edgeTtlMs: number;
  now?: () => number;
}

const strings = (values: string[]): ListValue =>
  create(ListValueSchema, { values: values.map((value) => create(ValueSchema, { kind: { case: "stringValue", value } })) });

/** Reads only: the stat the worker stored for the namespace, and the namespace's live topology edges. */
export function createStatsService(deps: StatsServiceDeps): ServiceImpl<typeof StatsService> {
  const now = deps.now ?? Date.now;
  return {
    async getStat(req) {
      checkNamespace(req.namespace, deps.namespaceRule);
      // A namespace no pass has counted yet (new, or created less than one period ago) answers zeros.
      return (await deps.stats.read(req.namespace)) ?? EMPTY_STAT;
    },
    async getTopology(req) {
      checkNamespace(req.namespace, deps.namespaceRule);
      const producers = new Map<string, string[]>();
      for (const e of await deps.topology.edges(req.namespace, now() - deps.edgeTtlMs)) {
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
