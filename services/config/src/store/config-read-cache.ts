import { createReadGuard } from "@gov/redis";
import type { ConfigRecord } from "./config-store.js";

/** A cached read result: the record, or null for "this config does not exist". */
export type CachedRead = ConfigRecord | null;

export interface ConfigReadCacheOptions {
  /** Most entries kept (default 10,000). */
  maxEntries?: number;
  /** Most config bytes kept, counted as data length (default 64 MiB). */
  maxBytes?: number;
}

/** A read in flight: remembers when it started so a late result cannot undo a newer invalidation. */
export interface ReadTicket {
  readonly namespace: string;
  readonly configId: string;
  readonly seq: number;
}

interface Entry {
  readonly namespace: string;
  readonly configId: string;
  readonly value: CachedRead;
  readonly size: number;
  /** Set by every hit, cleared when eviction passes over the entry (second chance). */
  referenced: boolean;
}

/** Maps keyed by namespace, then config id: no key string is built per lookup, and any characters stay distinct. */
class TwoLevelMap<V> {
  private readonly byNamespace = new Map<string, Map<string, V>>();

  get(namespace: string, configId: string): V | undefined {
    return this.byNamespace.get(namespace)?.get(configId);
  }

  set(namespace: string, configId: string, value: V): void {
    let ids = this.byNamespace.get(namespace);
    if (ids === undefined) this.byNamespace.set(namespace, (ids = new Map()));
    ids.set(configId, value);
  }

  has(namespace: string): boolean {
    return this.byNamespace.has(namespace);
  }

  delete(namespace: string, configId: string): void {
    const ids = this.byNamespace.get(namespace);
    if (ids === undefined || !ids.delete(configId)) return;
    if (ids.size === 0) this.byNamespace.delete(namespace);
  }

  clear(): void {
    this.byNamespace.clear();
  }
}

/**
 * In-process cache of `get(namespace, configId)` results, kept correct by invalidations.
 *
 * Staleness guard (`@gov/redis` createReadGuard): a read takes a ticket (the sequence at its start) and may only store
 * its result when its key — and the whole cache — was not invalidated since.
 *
 * Bounded by count and by data size. Eviction is second-chance FIFO (CLOCK): a hit only sets a flag on its entry —
 * the hot path of every cached GET, where moving the entry to the recent end cost a delete and a re-insert — and
 * eviction, walking from the oldest insert, spares a flagged entry once by clearing its flag and moving it to the end.
 */
export function createConfigReadCache(options: ConfigReadCacheOptions = {}) {
  const maxEntries = options.maxEntries ?? 10_000;
  const maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
  const entries = new TwoLevelMap<Entry>();
  const order = new Set<Entry>(); // insertion order: eviction walks it from the oldest
  let bytes = 0;
  const guard = createReadGuard();

  const sizeOf = (value: CachedRead) => (value ? value.data.length + 64 : 64);
  const drop = (entry: Entry) => {
    entries.delete(entry.namespace, entry.configId);
    order.delete(entry);
    bytes -= entry.size;
  };
  const evictBeyondBounds = () => {
    for (const oldest of order) {
      if (order.size <= maxEntries && bytes <= maxBytes) return;
      if (oldest.referenced) {
        // Second chance: moved behind the newest; the loop reaches it again only after everything else.
        oldest.referenced = false;
        order.delete(oldest);
        order.add(oldest);
      } else drop(oldest);
    }
  };

  return {
    /** The cached result, or undefined on a miss. Records are frozen and shared: callers must not change them. */
    lookup(namespace: string, configId: string): CachedRead | undefined {
      const entry = entries.get(namespace, configId);
      if (entry === undefined) return undefined;
      entry.referenced = true;
      return entry.value;
    },

    begin(namespace: string, configId: string): ReadTicket {
      return { namespace, configId, seq: guard.begin() };
    },

    /** Ends a read; stores `value` when given and still valid. Call exactly once per ticket (also on failure). */
    end(ticket: ReadTicket, value?: CachedRead): void {
      const { namespace, configId } = ticket;
      const valid = guard.end(namespace, configId, ticket.seq);
      const size = value === undefined ? 0 : sizeOf(value);
      if (value !== undefined && valid && size <= maxBytes) {
        const old = entries.get(namespace, configId);
        if (old !== undefined) drop(old);
        // Shared, not copied: a hot read then yields the same record, which lets callers reuse what they made of it.
        const entry: Entry = { namespace, configId, value: value && Object.freeze(value), size, referenced: false };
        entries.set(namespace, configId, entry);
        order.add(entry);
        bytes += size;
        evictBeyondBounds();
      }
    },

    /** Forgets one config; reads that started earlier will not store their (possibly old) result. */
    invalidate(namespace: string, configId: string): void {
      guard.invalidate(namespace, configId);
      const entry = entries.get(namespace, configId);
      if (entry !== undefined) drop(entry);
    },

    /**
     * Whether an invalidation in `namespace` could change anything: an entry of it is cached, or a read (of any key)
     * is in flight and must learn of it. False lets a change event be ignored without decoding it.
     */
    concerns(namespace: string): boolean {
      return guard.reading || entries.has(namespace);
    },

    /** Nothing cached and no read under way: no invalidation could change anything. */
    get empty(): boolean {
      return order.size === 0 && !guard.reading;
    },

    /** Forgets everything (events may have been missed); `enabled` false also stops caching until re-enabled. */
    clear(enable: boolean): void {
      guard.clear(enable);
      entries.clear();
      order.clear();
      bytes = 0;
    },

    get size() {
      return order.size;
    },
  };
}

export type ConfigReadCache = ReturnType<typeof createConfigReadCache>;
