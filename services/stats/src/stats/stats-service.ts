import { create } from "@bufbuild/protobuf";
import { ListValueSchema, ValueSchema, type ListValue } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import type { TopologyStore } from "@gov/registry-service";
import { callerOf } from "@gov/security-service";
import { checkNamespace, type NamespaceRule } from "@gov/service-kit";
import { visibleNamespaces } from "../namespaces/namespace-service.js";
import type { NamespaceSource } from "../worker/stats-pass.js";
import { EMPTY_STAT, type StatsStore } from "./stats-store.js";

export interface StatsServiceDeps {
  stats: Pick<StatsStore, "read">;
  topology: Pick<TopologyStore, "edges">;
  /** The namespace index: a caller who may not read every namespace is told how many it may read. */
  namespaces: Pick<NamespaceSource, "list">;
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
    async getStat(req, ctx) {
      checkNamespace(req.namespace, deps.namespaceRule);
      // A namespace no pass has counted yet (new, or created less than one period ago) answers zeros.
      const stat = (await deps.stats.read(req.namespace)) ?? EMPTY_STAT;
      // The pass counts every namespace; a caller that may read only some of them (not an admin, security on) is told
      // how many it may read, as GET /v1/namespaces lists them. Admins and security off keep the pass's count, with no
      // round trip of their own.
      const caller = callerOf(ctx);
      if (stat === EMPTY_STAT || caller === undefined || caller.admin) return stat;
      return { ...stat, namespaces: visibleNamespaces(await deps.namespaces.list(), ctx).length };
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
