/**
 * The staleness guard of a read cache kept by change events (the config and registry stores' caches): a read that
 * started before an invalidation of its key, or before the whole cache was cleared, must not store its result.
 *
 * Every invalidation takes a new sequence number; a read begins with the current one and may store its result only
 * if neither its key nor the whole cache was invalidated since. Invalidations are remembered per key only while reads
 * are in flight, so that memory stays bounded. Keys are a namespace and an id (nested maps: no key string is built,
 * and any characters stay distinct).
 */
export function createReadGuard() {
  let seq = 0;
  let clearedAt = 0;
  let enabled = false;
  let inFlight = 0;
  const invalidatedAt = new Map<string, Map<string, number>>();

  return {
    /** A read starts: the sequence number to hand back to `end`. */
    begin(): number {
      inFlight++;
      return seq;
    },

    /** The read that began at `startSeq` ended: whether its result may be stored. Call exactly once per `begin`. */
    end(namespace: string, id: string, startSeq: number): boolean {
      inFlight--;
      const valid = enabled && startSeq >= clearedAt && (invalidatedAt.get(namespace)?.get(id) ?? 0) <= startSeq;
      if (inFlight === 0) invalidatedAt.clear();
      return valid;
    },

    /** The key changed: reads in flight must not store what they read. */
    invalidate(namespace: string, id: string): void {
      seq++;
      if (inFlight === 0) return;
      let ids = invalidatedAt.get(namespace);
      if (ids === undefined) invalidatedAt.set(namespace, (ids = new Map()));
      ids.set(id, seq);
    },

    /** Whether a read is in flight (it must learn of any invalidation, whatever the cache holds). */
    get reading(): boolean {
      return inFlight > 0;
    },

    /** Many keys changed at once (a namespace was deleted): no read in flight may store what it read. */
    invalidateAll(): void {
      seq++;
      clearedAt = seq;
    },

    /** Everything changed (events may have been missed); `enable` false also refuses every result until re-enabled. */
    clear(enable: boolean): void {
      seq++;
      clearedAt = seq;
      enabled = enable;
    },
  };
}

export type ReadGuard = ReturnType<typeof createReadGuard>;
