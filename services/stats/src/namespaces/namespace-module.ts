import { NamespaceService } from "@gov/api/gen/gov/stats/v1/namespace_pb";
import { sharedConfigStore } from "@gov/config-service";
import { sharedNamespaceIndex } from "@gov/namespaces";
import { sharedRegistryStore, sharedTopologyStore } from "@gov/registry-service";
import type { LocalService, ModuleContext } from "@gov/service-kit";
import type { StatsStore } from "../stats/stats-store.js";
import { createNamespaceService } from "./namespace-service.js";

/**
 * The namespace service of a process, on the process's shared index and stores (`ModuleContext.shared`): the same
 * instances the config and registry modules write through, so a forced delete is seen by their caches and watches
 * also on the embedded store. `stats`: the store the statistics job writes (the module's, which tests may inject), whose
 * counts of a deleted namespace go with it.
 */
export async function namespaceServiceFor(ctx: ModuleContext, settings: { requireHashTag: boolean }, stats: StatsStore): Promise<LocalService> {
  const registry = await sharedRegistryStore(ctx);
  const impl = createNamespaceService({
    index: await sharedNamespaceIndex(ctx),
    configs: await sharedConfigStore(ctx),
    registry,
    topology: await sharedTopologyStore(ctx, registry),
    stats,
    namespaceRule: { requireHashTag: settings.requireHashTag },
  });
  return { service: NamespaceService, impl };
}
