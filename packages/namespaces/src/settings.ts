import { checkNamespace } from "@gov/service-kit";
import type { SettingDef } from "@gov/settings";

/** The system namespace unless `gov.namespace.system` says otherwise (contract §2). */
export const DEFAULT_SYSTEM_NAMESPACE = "gov-{system}";

/** The system namespace must carry a hash tag whatever the storage: its keys (index, current namespace) share a slot. */
function parseSystemNamespace(raw: string): string {
  const ns = raw.trim();
  checkNamespace(ns, { requireHashTag: true });
  return ns;
}

/** Settings of every module that opens the namespace index (config, registry, stats, worker). */
export const namespaceSettings = {
  systemNamespace: {
    name: "gov.namespace.system",
    parse: parseSystemNamespace,
    default: DEFAULT_SYSTEM_NAMESPACE,
    doc: "the system namespace: holds the namespace index, the current context namespace (and users, roles, audit log); created at startup, never deletable. Must carry a `{tag}`",
  } as SettingDef<string>,
};
