import { mapInTurns, sortInTurns } from "@gov/service-kit";
import type {
  ConfigChange,
  ConfigHistoryRecord,
  ConfigRecord,
  ConfigStore,
  ConfigStoreOptions,
  ConfigVersionInfo,
  WriteResult,
} from "./config-store.js";

interface Entry {
  current?: ConfigRecord;
  /** Superseded versions, oldest first. */
  history: ConfigHistoryRecord[];
}

/** The embedded store: same behaviour as Redis, held in this process only (for trying the product and tests). */
export function createMemoryConfigStore(options: ConfigStoreOptions): ConfigStore {
  const namespaces = new Map<string, Map<string, Entry>>();
  const listeners = new Set<(change: ConfigChange) => void>();

  const entryOf = (ns: string, id: string, create: boolean): Entry | undefined => {
    let configs = namespaces.get(ns);
    if (!configs) {
      if (!create) return undefined;
      configs = new Map();
      namespaces.set(ns, configs);
    }
    let entry = configs.get(id);
    if (!entry && create) {
      entry = { history: [] };
      configs.set(id, entry);
    }
    return entry;
  };

  const archive = (entry: Entry, op: ConfigHistoryRecord["op"], now: number) => {
    if (!entry.current) return;
    entry.history.push({ ...entry.current, op, opTime: now });
    // shift() drops the oldest in place (V8 trims the array's start); splice(0, n) cost twice the whole archive step
    while (entry.history.length > options.maxVersions) entry.history.shift();
  };

  const lastVersion = (entry: Entry) => Math.max(entry.current?.version ?? 0, entry.history.at(-1)?.version ?? 0);

  const emit = (change: ConfigChange) => {
    for (const l of listeners) queueMicrotask(() => l(change));
  };

  // A set of the current content writes nothing; a rollback always writes its version (contract §4), even of the
  // content that is current already: the history then says the rollback was asked for, and when.
  const write = (ns: string, id: string, entry: Entry, data: string, hash: string, op: "set" | "rollback", now: number): WriteResult => {
    if (op === "set" && entry.current?.hash === hash) return { changed: false, version: entry.current.version };
    const version = lastVersion(entry) + 1;
    archive(entry, op, now);
    entry.current = Object.freeze({ configId: id, data, hash, version, createTime: now });
    emit({ namespace: ns, configId: id, op, version });
    return { changed: true, version };
  };

  return {
    kind: "embedded",
    async list(ns) {
      const configs = namespaces.get(ns);
      if (!configs) return [];
      // The ids are taken in one piece (a consistent listing, ~2 ms for 100,000) and sorted a few milliseconds at a
      // time: one sort of a 100,000-config namespace held the event loop for 30–130 ms.
      const ids: string[] = [];
      for (const [id, e] of configs) if (e.current) ids.push(id);
      return sortInTurns(ids);
    },
    async get(ns, id) {
      // Records are never changed once written (a write replaces them), so readers may share them.
      return entryOf(ns, id, false)?.current;
    },
    async set(ns, id, data, hash, now) {
      return write(ns, id, entryOf(ns, id, true)!, data, hash, "set", now);
    },
    async create(ns, id, data, hash, now) {
      const entry = entryOf(ns, id, true)!;
      return entry.current ? undefined : write(ns, id, entry, data, hash, "set", now);
    },
    async remove(ns, id, now) {
      const entry = entryOf(ns, id, false);
      if (!entry?.current) return false;
      const version = entry.current.version;
      archive(entry, "remove", now);
      entry.current = undefined;
      emit({ namespace: ns, configId: id, op: "remove", version });
      return true;
    },
    async rollback(ns, id, target, now) {
      const entry = entryOf(ns, id, false);
      if (!entry) return undefined;
      const source = entry.current?.version === target ? entry.current : entry.history.find((h) => h.version === target);
      if (!source) return undefined;
      return write(ns, id, entry, source.data, source.hash, "rollback", now);
    },
    async versions(ns, id) {
      const history = entryOf(ns, id, false)?.history ?? [];
      // a few milliseconds at a time, as the Redis store: a 100,000-version history is ~20 ms of copying in one piece
      return mapInTurns(history.toReversed(), (h): ConfigVersionInfo => ({ configId: h.configId, version: h.version, op: h.op, opTime: h.opTime }));
    },
    async version(ns, id, v) {
      const h = entryOf(ns, id, false)?.history.find((x) => x.version === v);
      return h && { ...h };
    },
    async count(ns) {
      let n = 0;
      for (const entry of namespaces.get(ns)?.values() ?? []) if (entry.current) n++;
      return n;
    },
    async deleteNamespace(ns, options) {
      const configs = namespaces.get(ns);
      if (!configs) return 0;
      if (options?.onlyIfEmpty && [...configs.values()].some((e) => e.current)) return undefined;
      namespaces.delete(ns);
      let n = 0;
      for (const [id, entry] of configs) {
        if (!entry.current) continue;
        n++;
        emit({ namespace: ns, configId: id, op: "remove", version: entry.current.version });
      }
      return n;
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      listeners.clear();
    },
  };
}
