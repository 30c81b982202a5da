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
  readonly key: string;
  readonly seq: number;
}

/**
 * In-process cache of `get(namespace, configId)` results, kept correct by invalidations.
 *
 * Staleness guard: every invalidation takes a new sequence number. A read takes a ticket (the sequence at its
 * start) and may only store its result when its key — and the whole cache — was not invalidated since.
 * Invalidations are remembered per key only while reads are in flight, so that memory stays bounded.
 * Entries are evicted least-recently-used first, by count and by data size.
 */
export function createConfigReadCache(options: ConfigReadCacheOptions = {}) {
  const maxEntries = options.maxEntries ?? 10_000;
  const maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
  const entries = new Map<string, CachedRead>(); // insertion order = recency order
  let bytes = 0;
  let seq = 0;
  let clearedAt = 0;
  let enabled = false;
  let inFlight = 0;
  const invalidatedAt = new Map<string, number>();

  const sizeOf = (value: CachedRead) => (value ? value.data.length + 64 : 64);
  const drop = (key: string) => {
    const old = entries.get(key);
    if (old === undefined) return;
    entries.delete(key);
    bytes -= sizeOf(old);
  };

  return {
    /** Key of one config; the length prefix keeps (ns, id) pairs distinct whatever characters they hold. */
    keyOf: (namespace: string, configId: string) => `${namespace.length}:${namespace}${configId}`,

    /** The cached result, or undefined on a miss. Records are frozen and shared: callers must not change them. */
    lookup(key: string): CachedRead | undefined {
      const value = entries.get(key);
      if (value === undefined) return undefined;
      entries.delete(key); // move to the most recent end
      entries.set(key, value);
      return value;
    },

    begin(key: string): ReadTicket {
      inFlight++;
      return { key, seq };
    },

    /** Ends a read; stores `value` when given and still valid. Call exactly once per ticket (also on failure). */
    end(ticket: ReadTicket, value?: CachedRead): void {
      inFlight--;
      const valid = enabled && ticket.seq >= clearedAt && (invalidatedAt.get(ticket.key) ?? 0) <= ticket.seq;
      if (value !== undefined && valid && sizeOf(value) <= maxBytes) {
        drop(ticket.key);
        // Shared, not copied: a hot read then yields the same record, which lets callers reuse what they made of it.
        entries.set(ticket.key, value && Object.freeze(value));
        bytes += sizeOf(value);
        for (const [oldest] of entries) {
          if (entries.size <= maxEntries && bytes <= maxBytes) break;
          drop(oldest);
        }
      }
      if (inFlight === 0) invalidatedAt.clear();
    },

    /** Forgets one config; reads that started earlier will not store their (possibly old) result. */
    invalidate(key: string): void {
      seq++;
      drop(key);
      if (inFlight > 0) invalidatedAt.set(key, seq);
    },

    /** Forgets everything (events may have been missed); `enabled` false also stops caching until re-enabled. */
    clear(enable: boolean): void {
      seq++;
      clearedAt = seq;
      enabled = enable;
      entries.clear();
      bytes = 0;
    },

    get size() {
      return entries.size;
    },
  };
}

export type ConfigReadCache = ReturnType<typeof createConfigReadCache>;
