import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { NamespaceService } from "@gov/api/gen/gov/stats/v1/namespace_pb";
import type { ConfigStore } from "@gov/config-service";
import type { NamespaceIndex } from "@gov/namespaces";
import type { RegistryStore, TopologyStore } from "@gov/registry-service";
import { checkNamespace, checkNewNamespace, withInvisibleWrittenOut, type NamespaceRule } from "@gov/service-kit";
import { callerOf, readableNamespaces } from "@gov/security-service";
import type { StatsStore } from "../stats/stats-store.js";

export interface NamespaceServiceDeps {
  index: Omit<NamespaceIndex, "close">;
  configs: Pick<ConfigStore, "count" | "deleteNamespace">;
  registry: Pick<RegistryStore, "countServices" | "deleteNamespace">;
  /** The namespace's topology edges go with it. */
  topology?: Pick<TopologyStore, "prune">;
  /** And its counts: a deleted namespace's stat reads zeros at once (the next statistics pass would drop them too). */
  stats?: Pick<StatsStore, "forget">;
  namespaceRule: NamespaceRule;
}

/** The namespaces a caller may see (contract §7): those its roles let it read; all for an admin or with security off. */
export function visibleNamespaces(all: string[], ctx: HandlerContext): string[] {
  return readableNamespaces(callerOf(ctx), all);
}

/**
 * "current" names the current-namespace routes (GET /v1/namespaces/current, PUT /v1/namespaces/current/{ns}): a
 * namespace of that name could be created only with gov.namespace.require-hash-tag=false and could then never be read
 * back by name, so it is refused everywhere here.
 */
const RESERVED = "current";

export function createNamespaceService(deps: NamespaceServiceDeps): ServiceImpl<typeof NamespaceService> {
  const { index } = deps;
  const checkTarget = (ns: string) => {
    // before the hash-tag rule: `PUT /v1/namespaces/current` is far likelier a current-namespace call missing its name
    if (ns === RESERVED) {
      throw new ConnectError(`"${RESERVED}" cannot name a namespace: to make a namespace the current one, name it (PUT /v1/namespaces/current/{namespace}); to create one, use a name with a hash tag such as {current}`, Code.InvalidArgument);
    }
    checkNamespace(ns, deps.namespaceRule);
  };

  return {
    async listNamespaces(_req, ctx) {
      return { namespaces: visibleNamespaces(await index.list(), ctx) };
    },

    async getCurrentNamespace() {
      return { namespace: await index.current() };
    },

    async setCurrentNamespace(req) {
      checkTarget(req.namespace);
      checkNewNamespace(req.namespace, deps.namespaceRule);
      await index.setCurrent(req.namespace);
      return { set: true };
    },

    async createNamespace(req) {
      checkTarget(req.namespace);
      checkNewNamespace(req.namespace, deps.namespaceRule);
      return { created: await index.create(req.namespace) };
    },

    async deleteNamespace(req) {
      const ns = req.namespace;
      checkTarget(ns);
      if (ns === index.system) {
        throw new ConnectError(
          `namespace "${ns}" is the system namespace (gov.namespace.system): it holds the namespace index, users, roles and the audit log, and cannot be deleted`,
          Code.FailedPrecondition,
        );
      }
      const [configs, services] = await Promise.all([deps.configs.count(ns), deps.registry.countServices(ns)]);
      const stillHolds = (c: number, s: number) =>
        new ConnectError(
          `namespace "${withInvisibleWrittenOut(ns)}" still holds ${c} config(s) and ${s} service(s): delete them first, or delete the namespace with ?force=true (force: true) to remove them with it`,
          Code.FailedPrecondition,
        );
      if ((configs > 0 || services > 0) && !req.force) throw stillHolds(configs, services);
      if (configs === 0 && services === 0 && !(await index.has(ns))) {
        // written out where a character would not show: "{dev}\u200b" must not read as naming the existing "{dev}"
        throw new ConnectError(`namespace "${withInvisibleWrittenOut(ns)}" does not exist: list them with GET /v1/namespaces`, Code.NotFound);
      }
      // The data first, the index last: a delete cut short (Redis unreachable or slow: 503/504 "may or may not have been
      // applied"; 409 "kept changing") leaves the namespace listed with what is left of it, so that it is still counted,
      // swept and deletable (a retried delete finishes it), with no step after the failure that an outage could also
      // stop. Writes racing the delete are counted again once it is out of the index (below).
      let unlisted = false;
      try {
        // Also without force: what an emptied namespace still has (the history of deleted configs, service counts) goes
        // too — but a config or service written since the count survives: each store checks "empty" atomically.
        const onlyIfEmpty = !req.force;
        const removedConfigs = await deps.configs.deleteNamespace(ns, { onlyIfEmpty });
        const removed = removedConfigs === undefined ? undefined : await deps.registry.deleteNamespace(ns, { onlyIfEmpty });
        if (removedConfigs === undefined || removed === undefined) {
          throw stillHolds(await deps.configs.count(ns), await deps.registry.countServices(ns)); // still listed
        }
        // Out of the index: every process forgets it, so a write from now on indexes it again.
        await index.remove(ns);
        unlisted = true;
        await deps.topology?.prune(ns, Number.MAX_SAFE_INTEGER);
        await deps.stats?.forget(ns);
        // A write that raced the delete in another process may have been indexed there before that process heard of the
        // removal (its index cache still knew the name), and landed after the data was deleted: it is kept (it came
        // later), and must stay listed. Counted again now that the delete is done.
        const [laterConfigs, laterServices] = await Promise.all([deps.configs.count(ns), deps.registry.countServices(ns)]);
        if (laterConfigs > 0 || laterServices > 0) await index.add(ns);
        return { removed: true, configs: removedConfigs, services: removed.services, instances: removed.instances };
      } catch (err) {
        // Failed after the index forgot it (the topology or the counts could not be dropped): listed again, best effort,
        // so that a retried delete removes what is left rather than answering 404.
        if (unlisted) await index.add(ns).catch(() => {});
        throw err;
      }
    },
  };
}
