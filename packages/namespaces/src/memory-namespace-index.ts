import { SystemNamespaceError, type NamespaceIndex } from "./namespace-index.js";

/** The embedded index: one per process (shared by its modules through `ModuleContext.shared`). */
export function createMemoryNamespaceIndex(system: string): NamespaceIndex {
  const names = new Set<string>([system]);
  let current = system;
  return {
    kind: "embedded",
    system,
    async add(ns) {
      names.add(ns);
    },
    async create(ns) {
      if (names.has(ns)) return false;
      names.add(ns);
      return true;
    },
    async has(ns) {
      return names.has(ns);
    },
    async list() {
      return [...names].sort();
    },
    async count() {
      return names.size;
    },
    async remove(ns) {
      if (ns === system) throw new SystemNamespaceError(system);
      if (!names.delete(ns)) return false;
      if (current === ns) current = system;
      return true;
    },
    async current() {
      return current;
    },
    async setCurrent(ns) {
      names.add(ns);
      current = ns;
    },
    async close() {},
  };
}
