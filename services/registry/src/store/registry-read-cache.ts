import { createReadGuard } from "@gov/redis";
import type { InstanceRecord, RegistryChange, RegistryStore } from "./registry-store.js";

export interface RegistryReadCacheOptions {
  /** Most services kept (default 10,000). */
  maxServices?: number;
  /**
   * Most instances kept over all services (default 100,000; with what the service and the gateway derive from a record,
   * its message and JSON text, about 1 KB each); a larger service is read from the store every time.
   */
  maxInstances?: number;
}

/** One service's live instances as read at `readAt`, valid for reads in [readAt, validUntil). */
interface Entry {
  readonly namespace: string;
  readonly serviceId: string;
  /** Sorted by instance id. */
  instances: readonly InstanceRecord[];
  /**
   * Instances registered or changed since (an event said so): each is read again on its own before the entry is
   * served, so that a change to one instance of a large service does not cost a read of all of them.
   */
  readonly stale: Set<string>;
  /**
   * Changes not yet applied to `instances`: ids gone (deregistered, expired) and renewals' new ttlAt. Events of a
   * sweep arrive by the hundred in one turn; applying each at once copied the whole service per event (500 expiries
   * of a 5,000-instance service: a 300 ms stall). They are applied in one pass by the next read, or once they are as
   * many as the instances (so each costs O(1) amortized). Until then `validUntil` stays a lower bound: removing an
   * instance or renewing one can only move the earliest ttlAt later.
   */
  readonly gone: Set<string>;
  readonly renewals: Map<string, number>;
  readonly readAt: number;
  /** The earliest ttlAt among the instances (Infinity when all are fixed): past it the entry is no longer current. */
  validUntil: number;
  /** Set by every hit, cleared when eviction passes over the entry (second chance). */
  referenced: boolean;
}

/** A read in flight: remembers when it started so a late result cannot undo a newer invalidation. */
interface ReadTicket {
  readonly namespace: string;
  readonly serviceId: string;
  readonly seq: number;
}

/** Past this many instances to read again, the entry goes: one read of the service is then cheaper. */
const MAX_STALE = 32;

/** The order of `listInstances` (the store port's rule): a patched entry keeps it. */
const byInstanceId = (a: InstanceRecord, b: InstanceRecord) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0);

/** Applies the entry's pending removals and renewals (see Entry.gone), answering how many instances it dropped. */
function applyPending(entry: Entry): number {
  if (entry.gone.size === 0 && entry.renewals.size === 0) return 0;
  const kept: InstanceRecord[] = [];
  for (const r of entry.instances) {
    if (entry.gone.has(r.instanceId)) continue;
    const ttlAt = entry.renewals.get(r.instanceId);
    kept.push(ttlAt === undefined ? r : Object.freeze({ ...r, ttlAt }));
  }
  const dropped = entry.instances.length - kept.length;
  entry.gone.clear();
  entry.renewals.clear();
  entry.instances = Object.freeze(kept);
  entry.validUntil = earliestTtlAt(kept);
  return dropped;
}

const earliestTtlAt = (instances: readonly InstanceRecord[]) => {
  let earliest = Infinity;
  for (const r of instances) if (r.ttlAt !== undefined && r.ttlAt < earliest) earliest = r.ttlAt;
  return earliest;
};

/**
 * In-process cache of `listInstances(namespace, serviceId)` results, kept current by the store's change events.
 *
 * Why it never drops a live instance nor keeps a dead one:
 * - An instance becomes live only by a registration and dies early only by a deregistration, a re-registration (its
 *   ttl may shrink, it may become fixed) or a service deletion; each publishes an event (and a write through this
 *   store tells the cache at once, for read-your-writes). A deregistration or an expiry removes the instance from the
 *   entry; a registration or a metadata change marks it stale, and the next read reads that one instance again before
 *   it answers (a read of the whole service when that fails or races another change); anything else drops the entry.
 * - Otherwise an instance dies when its ttlAt passes, which needs no event: an entry is served only while `now` is
 *   before the earliest ttlAt it holds, so every instance it returns is live at `now`.
 * - A renewal only pushes ttlAt later, and most renewals publish nothing (see shouldPublishRenew). An entry may thus
 *   hold an older ttlAt than the store: it then stops being current a little early and is read again — never is an
 *   instance dropped because its renewal went unannounced. A renewal through this store updates the entry in place.
 *
 * A read that started before an invalidation of its service (or a clear) never stores its result (`@gov/redis`
 * createReadGuard, shared with the config cache). Bounded by services and by instances, with second-chance FIFO
 * (CLOCK) eviction: a hit only sets a flag.
 */
export function createRegistryReadCache(options: RegistryReadCacheOptions = {}) {
  const maxServices = options.maxServices ?? 10_000;
  const maxInstances = options.maxInstances ?? 100_000;
  const entries = new Map<string, Map<string, Entry>>(); // namespace → service id → entry
  const order = new Set<Entry>(); // insertion order: eviction walks it from the oldest
  let instances = 0;
  const guard = createReadGuard();

  const entryOf = (namespace: string, serviceId: string) => entries.get(namespace)?.get(serviceId);
  const drop = (entry: Entry) => {
    const services = entries.get(entry.namespace);
    if (services?.get(entry.serviceId) === entry) {
      services.delete(entry.serviceId);
      if (services.size === 0) entries.delete(entry.namespace);
    }
    order.delete(entry);
    instances -= entry.instances.length;
  };
  /** Pending changes are applied once they are as many as the instances: O(1) each, amortized, and bounded. */
  const settleBeyondBound = (entry: Entry) => {
    if (entry.gone.size + entry.renewals.size > Math.max(64, entry.instances.length)) instances -= applyPending(entry);
  };
  const evictBeyondBounds = () => {
    for (const oldest of order) {
      if (order.size <= maxServices && instances <= maxInstances) return;
      if (oldest.referenced) {
        oldest.referenced = false; // second chance: behind the newest
        order.delete(oldest);
        order.add(oldest);
      } else drop(oldest);
    }
  };

  return {
    /**
     * The live instances at `now` when the service's entry is current and none of them is stale; `{ stale }`: current
     * but for those instances, which the caller reads and hands to `endPatch`; undefined: read the store.
     */
    lookup(namespace: string, serviceId: string, now: number): readonly InstanceRecord[] | { stale: string[] } | undefined {
      const entry = entryOf(namespace, serviceId);
      if (entry === undefined || now < entry.readAt) return undefined;
      instances -= applyPending(entry);
      if (now >= entry.validUntil) return undefined;
      entry.referenced = true;
      return entry.stale.size === 0 ? entry.instances : { stale: [...entry.stale] };
    },

    /**
     * Ends the read of stale instances (`records[i]` is `ids[i]` as read, undefined when it is gone), begun with
     * `begin`: the entry with them in place, or undefined when it may not be used (another change or a clear came
     * meanwhile, or the entry went) — then read the whole service. Call exactly once per ticket (also on failure).
     */
    endPatch(ticket: ReadTicket, ids: string[], records?: (InstanceRecord | undefined)[]): readonly InstanceRecord[] | undefined {
      const { namespace, serviceId } = ticket;
      const valid = guard.end(namespace, serviceId, ticket.seq);
      const entry = entryOf(namespace, serviceId);
      if (!valid || records === undefined || entry === undefined) return undefined;
      instances -= applyPending(entry);
      const replaced = new Set(ids);
      const patched = entry.instances.filter((r) => !replaced.has(r.instanceId));
      for (const r of records) if (r !== undefined) patched.push(Object.freeze(r));
      patched.sort(byInstanceId);
      instances += patched.length - entry.instances.length;
      entry.instances = Object.freeze(patched);
      entry.validUntil = earliestTtlAt(patched);
      for (const id of ids) entry.stale.delete(id);
      evictBeyondBounds();
      return entry.instances;
    },

    begin(namespace: string, serviceId: string): ReadTicket {
      return { namespace, serviceId, seq: guard.begin() };
    },

    /** Ends a read; stores what it read at `readAt` when still valid. Call exactly once per ticket (also on failure). */
    end(ticket: ReadTicket, read?: { instances: readonly InstanceRecord[]; readAt: number }): void {
      const { namespace, serviceId } = ticket;
      const valid = guard.end(namespace, serviceId, ticket.seq);
      if (read !== undefined && valid && read.instances.length <= maxInstances) {
        const old = entryOf(namespace, serviceId);
        if (old !== undefined) drop(old);
        const entry: Entry = {
          namespace,
          serviceId,
          instances: Object.freeze(read.instances),
          stale: new Set(),
          gone: new Set(),
          renewals: new Map(),
          readAt: read.readAt,
          validUntil: earliestTtlAt(read.instances),
          referenced: false,
        };
        let services = entries.get(namespace);
        if (services === undefined) entries.set(namespace, (services = new Map()));
        services.set(serviceId, entry);
        order.add(entry);
        instances += entry.instances.length;
        evictBeyondBounds();
      }
    },

    /** The namespace's services were all removed (a namespace delete): forget them, and refuse reads in flight. */
    forgetNamespace(namespace: string): void {
      guard.invalidateAll();
      for (const entry of entries.get(namespace)?.values() ?? []) drop(entry);
    },

    /** Forgets one service; reads that started earlier will not store their (possibly old) result. */
    invalidate(namespace: string, serviceId: string): void {
      guard.invalidate(namespace, serviceId);
      const entry = entryOf(namespace, serviceId);
      if (entry !== undefined) drop(entry);
    },

    /** A renewal through this store: the entry (if it holds the instance) gets its new expiry. */
    renewed(namespace: string, serviceId: string, instanceId: string, ttlAt: number): void {
      const entry = entryOf(namespace, serviceId);
      if (entry === undefined || entry.gone.has(instanceId)) return;
      entry.renewals.set(instanceId, ttlAt); // an id the entry does not hold is passed over when applied
      settleBeyondBound(entry);
    },

    /** One instance changed (registered, re-registered, new metadata): read it again before the entry is served. */
    instanceChanged(namespace: string, serviceId: string, instanceId: string): void {
      guard.invalidate(namespace, serviceId);
      const entry = entryOf(namespace, serviceId);
      if (entry === undefined) return;
      entry.stale.add(instanceId);
      if (entry.stale.size > MAX_STALE) drop(entry);
    },

    /** One instance is gone (deregistered, expired): the entry goes on without it. */
    instanceGone(namespace: string, serviceId: string, instanceId: string): void {
      guard.invalidate(namespace, serviceId);
      const entry = entryOf(namespace, serviceId);
      if (entry === undefined) return;
      entry.stale.delete(instanceId);
      entry.renewals.delete(instanceId);
      entry.gone.add(instanceId); // an id the entry does not hold is passed over when applied
      settleBeyondBound(entry);
    },

    /** A change event (see above): a renewal changes nothing here; a service added or removed drops the entry. */
    apply(change: RegistryChange): void {
      const { namespace, serviceId, instanceId } = change;
      if (change.op === "renew") return;
      if (instanceId !== undefined && (change.op === "deregister" || change.op === "expired")) this.instanceGone(namespace, serviceId, instanceId);
      else if (instanceId !== undefined && (change.op === "register" || change.op === "metadata")) this.instanceChanged(namespace, serviceId, instanceId);
      else this.invalidate(namespace, serviceId);
    },

    /** Whether an event of `namespace` could change anything: an entry of it is cached, or a read is in flight. */
    concerns(namespace: string): boolean {
      return guard.reading || entries.has(namespace);
    },

    /** Forgets everything (events may have been missed); `enable` false also stops caching until re-enabled. */
    clear(enable: boolean): void {
      guard.clear(enable);
      entries.clear();
      order.clear();
      instances = 0;
    },

    /** Services and instances held (for tests and benchmarks). */
    get size() {
      return { services: order.size, instances };
    },
  };
}

export type RegistryReadCache = ReturnType<typeof createRegistryReadCache>;

/**
 * `store` with `listInstances` (and so `/lb`) served from `cache` while the service's entry is current. The cache must
 * be fed the store's change events (`cache.apply`) and cleared when the event feed is lost or back (`cache.clear`);
 * the Redis store does that (see redis-registry-store.ts). Writes through the wrapper tell the cache what they changed
 * when they are done, whatever their outcome (an unknown outcome may have changed it).
 */
export function cacheRegistryReads(store: RegistryStore, cache: RegistryReadCache): RegistryStore {
  /** A write's outcome told to the cache whatever it is (an unknown outcome may have changed the instance). */
  const thenTell = async <R>(write: Promise<R>, tell: () => void): Promise<R> => {
    try {
      return await write;
    } finally {
      tell();
    }
  };
  const readAll = async (ns: string, serviceId: string, now: number) => {
    const ticket = cache.begin(ns, serviceId);
    let read: { instances: InstanceRecord[]; readAt: number } | undefined;
    try {
      const instances = (await store.listInstances(ns, serviceId, now)).map((r) => Object.freeze(r)); // sorted by id (the port's rule)
      read = { instances, readAt: now };
      return instances.slice();
    } finally {
      cache.end(ticket, read);
    }
  };
  return {
    ...store,
    async listInstances(ns, serviceId, now) {
      const hit = cache.lookup(ns, serviceId, now);
      if (hit === undefined) return readAll(ns, serviceId, now);
      // A copy: callers may sort or filter what they get; the records themselves are shared and frozen.
      if (!("stale" in hit)) return hit.slice();
      const ticket = cache.begin(ns, serviceId);
      let records: (InstanceRecord | undefined)[] | undefined;
      let patched: readonly InstanceRecord[] | undefined;
      try {
        records = await Promise.all(hit.stale.map((id) => store.getInstance(ns, serviceId, id, now)));
      } finally {
        patched = cache.endPatch(ticket, hit.stale, records);
      }
      return patched === undefined ? readAll(ns, serviceId, now) : patched.slice();
    },
    register: (ns, r, now) => thenTell(store.register(ns, r, now), () => cache.instanceChanged(ns, r.serviceId, r.instanceId)),
    deregister: (ns, serviceId, instanceId, now) => thenTell(store.deregister(ns, serviceId, instanceId, now), () => cache.instanceGone(ns, serviceId, instanceId)),
    setMetadata: (ns, serviceId, instanceId, metadata, now) => thenTell(store.setMetadata(ns, serviceId, instanceId, metadata, now), () => cache.instanceChanged(ns, serviceId, instanceId)),
    deleteService: (ns, serviceId, now) => thenTell(store.deleteService(ns, serviceId, now), () => cache.invalidate(ns, serviceId)),
    // its removals are announced too, but a read in this process right after the delete must not wait for them
    async deleteNamespace(ns, options) {
      try {
        return await store.deleteNamespace(ns, options);
      } finally {
        cache.forgetNamespace(ns);
      }
    },
    async renew(ns, serviceId, instanceId, now) {
      const result = await store.renew(ns, serviceId, instanceId, now);
      if (result === undefined) cache.invalidate(ns, serviceId); // gone from the store: whatever is cached is old
      else if (result.ttlAt !== undefined) cache.renewed(ns, serviceId, instanceId, result.ttlAt);
      return result;
    },
    async close() {
      cache.clear(false);
      await store.close();
    },
  };
}
