import { mapInTurns, paceFanOut, perRecord, readThroughOutage } from "@gov/service-kit";
import FlatQueue from "flatqueue";
import { memberHash, SetDigest } from "./state-digest.js";
import type { InstanceRecord, RegistryChange, RegistryStore } from "./store/registry-store.js";
import { isInstanceOp } from "./store/registry-store.js";

/** About what an instance takes in a list message (JSON, with a little metadata): the weight of a resync's list. */
const INSTANCE_JSON_BYTES = 256;

/**
 * What a watch of one service's instances yields; `hash` is the digest of the instances the client holds once it has
 * applied the event (see KnownInstances).
 */
export type InstanceWatchEvent = (
  | { op: "current" | "resync"; instances: InstanceRecord[] }
  | { op: "register" | "renew" | "metadata"; instance: InstanceRecord }
  | { op: "deregister" | "expired"; instanceId: string }
) & { hash: string };

/** Whether the client already has `r` exactly (records are rewritten whole, so compare every field). */
function sameInstance(a: InstanceRecord | undefined, b: InstanceRecord): boolean {
  if (a === b) return true;
  if (!a) return false;
  const keys = Object.keys(b.metadata);
  return (
    a.schema === b.schema && a.host === b.host && a.port === b.port && a.weight === b.weight && a.isEphemeral === b.isEphemeral &&
    a.ttlAt === b.ttlAt && a.ttlMs === b.ttlMs && keys.length === Object.keys(a.metadata).length && keys.every((k) => a.metadata[k] === b.metadata[k])
  );
}

/**
 * An instance's hash as the client sees it (the fields of its Instance message; metadata in key order, so equal maps
 * hash alike), made once per record for every watch of the service: records are immutable and shared by the watches.
 */
const instanceHash = perRecord((r: InstanceRecord) =>
  memberHash(JSON.stringify([r.instanceId, r.serviceId, r.schema, r.host, r.port, r.weight, r.isEphemeral, r.ttlAt ?? null, Object.keys(r.metadata).sort().map((k) => [k, r.metadata[k]])])),
);

/** The hashes of a first message's (or a resync's) instances, a few milliseconds at a time (see mapInTurns). */
const hashesOf = (records: readonly InstanceRecord[]) => mapInTurns(records, instanceHash);

/**
 * Unread changes a watch keeps; a watcher that falls further behind gets one resync (the whole state) instead. The
 * change objects are the feed's, shared by every watch: a queue costs a slot per change. Large enough that a sweep
 * expiring hundreds of one service's instances at once reaches each watch as that many small events, not as a
 * resync of the whole service per watch (20 watches of 10,000 instances: ~50 MB of messages at once).
 */
export const MAX_QUEUED_CHANGES = 2048;

/** Past an instance's ttlAt, how long the watch waits before it re-reads (so the store's clock has passed it too). */
const EXPIRY_SLACK_MS = 5;

/**
 * Least time between two expiry steps of one watch: with thousands of instances expiring one after another, a step at
 * each ttl kept the event loop busy for seconds. Expiries that fall within one such pause are reported together, still
 * well within a second of their ttl.
 */
export const MIN_EXPIRY_REREAD_MS = 100;

/**
 * The expiry re-reads of a service's watches are shared: the watches wake on one grid of MIN_EXPIRY_REREAD_MS steps
 * (so together), and a read started less than half a step ago is used again rather than repeated. Each would otherwise
 * read (and parse) the whole service for itself. A shared result is read-only. One a little old only delays an expiry
 * to the next step: the ttl still known makes the watch look again.
 */
const SHARE_MS = MIN_EXPIRY_REREAD_MS / 2;
/** The live instances by id, as of `at`. */
type SharedRead = Promise<{ at: number; byId: Map<string, InstanceRecord> }>;
const sharedReads = new WeakMap<RegistryStore, Map<string, SharedRead>>();

/** `store`'s map in `maps` (made on first use) and the key of one service in it. */
function serviceSlot<T>(maps: WeakMap<RegistryStore, Map<string, T>>, store: RegistryStore, namespace: string, serviceId: string) {
  let map = maps.get(store);
  if (!map) maps.set(store, (map = new Map()));
  return { map, key: `${namespace}\u0000${serviceId}` };
}

function readShared(store: RegistryStore, namespace: string, serviceId: string, at: number, read: (at: number) => Promise<InstanceRecord[]>): SharedRead {
  const { map: reads, key } = serviceSlot(sharedReads, store, namespace, serviceId);
  let shared = reads.get(key);
  if (!shared) {
    shared = read(at).then((fresh) => ({ at, byId: new Map(fresh.map((r) => [r.instanceId, r])) }));
    reads.set(key, shared);
    const forget = () => void setTimeout(() => reads.delete(key), SHARE_MS).unref();
    // a failed read is not shared: the next caller tries again at once
    shared.then(forget, () => reads.delete(key));
  }
  return shared;
}

/**
 * Instances whose known ttl passed, read again one by one (when they are few against the service) and shared by the
 * service's watches like a whole read: per service, the reads begun in the last half step, each with its own time.
 */
type DueRead = Promise<{ at: number; record: InstanceRecord | undefined }>;
const dueReads = new WeakMap<RegistryStore, Map<string, Map<string, DueRead>>>();

function readDueShared(store: RegistryStore, namespace: string, serviceId: string, ids: string[], read: (id: string, at: number) => Promise<InstanceRecord | undefined>, now: () => number) {
  const { map: services, key } = serviceSlot(dueReads, store, namespace, serviceId);
  let batch = services.get(key);
  if (!batch) {
    const fresh = (batch = new Map<string, DueRead>());
    services.set(key, fresh);
    setTimeout(() => services.get(key) === fresh && services.delete(key), SHARE_MS).unref();
  }
  return Promise.all(
    ids.map((id) => {
      let pending = batch.get(id);
      if (!pending) {
        const at = now();
        pending = read(id, at).then((record) => ({ at, record }));
        batch.set(id, pending);
        pending.catch(() => batch.delete(id)); // a failed read is not shared
      }
      return pending;
    }),
  );
}

/** Past this share of a service's instances due at once, one read of the whole service is cheaper than one per id. */
const WHOLE_READ_SHARE = 1 / 8;

/**
 * The instance an event names, read once for every watch it reaches: the feed hands all of them the same change
 * object, and any read begun after its arrival sees what it announces (20 watches of a service each read every
 * registered instance for themselves). A failed read is not shared.
 */
const instanceReads = new WeakMap<RegistryChange, Promise<InstanceRecord | undefined>>();

function readInstanceOf(event: RegistryChange, read: () => Promise<InstanceRecord | undefined>): Promise<InstanceRecord | undefined> {
  let pending = instanceReads.get(event);
  if (!pending) {
    pending = read();
    instanceReads.set(event, pending);
    pending.catch(() => instanceReads.delete(event));
  }
  return pending;
}

/**
 * A watch's known instances with their ttls in a min-heap, so that an expiry step looks only at the instances whose
 * ttl passed: with 20 watches of a 5,000-instance service, scanning all of them at every step kept the event loop
 * busy for 100 ms at a time. A heap entry whose instance has another ttl now (or is gone) is passed over when reached.
 *
 * Also the digest of what the client holds (what it was sent), updated per change.
 */
class KnownInstances {
  readonly byId = new Map<string, InstanceRecord>();
  private readonly ttls = new FlatQueue<string>();
  private readonly digest = new SetDigest();

  /**
   * What the client holds now: `records` as sent, with their `hashes` (see hashesOf). Tracked a few milliseconds at a
   * time (mapInTurns): indexing and heaping 40,000 instances took 23–35 ms in one piece. The watch yields nothing
   * until this is done, so nothing reads the half-made state.
   */
  async reset(records: readonly InstanceRecord[], hashes: readonly Uint32Array[]): Promise<void> {
    this.byId.clear();
    this.ttls.clear();
    this.digest.reset(hashes);
    const tracked = mapInTurns(records, (r) => this.track(r));
    if (tracked instanceof Promise) await tracked;
  }

  set(r: InstanceRecord): void {
    const had = this.byId.get(r.instanceId);
    if (had) this.digest.remove(instanceHash(had));
    this.digest.add(instanceHash(r));
    this.track(r);
    // entries passed over are many: start the heap again from what is known
    if (this.ttls.length > 2 * this.byId.size + 64) this.rebuildHeap();
  }

  private track(r: InstanceRecord): void {
    this.byId.set(r.instanceId, r);
    if (r.ttlAt !== undefined) this.ttls.push(r.instanceId, r.ttlAt);
  }

  delete(id: string): boolean {
    const had = this.byId.get(id);
    if (!had) return false;
    this.digest.remove(instanceHash(had));
    return this.byId.delete(id);
  }

  /** The digest of the instances the client holds, as hex (an event's `hash`). */
  hash(): string {
    return this.digest.hex();
  }

  private rebuildHeap(): void {
    this.ttls.clear();
    for (const r of this.byId.values()) this.track(r);
  }

  /** The earliest ttl known (undefined: none expires). */
  earliest(): number | undefined {
    for (;;) {
      const id = this.ttls.peek();
      if (id === undefined) return undefined;
      const ttlAt = this.ttls.peekValue()!;
      if (this.byId.get(id)?.ttlAt === ttlAt) return ttlAt;
      this.ttls.pop();
    }
  }

  /** Takes the instances whose ttl is at most `t` (they are set again, or deleted, by the caller). */
  takeDue(t: number): InstanceRecord[] {
    const due: InstanceRecord[] = [];
    for (let at = this.earliest(); at !== undefined && at <= t; at = this.earliest()) {
      due.push(this.byId.get(this.ttls.pop()!)!);
    }
    return due;
  }
}

/**
 * The instances of one service as they change, until `signal` aborts: first "current" (every live instance), then one
 * event per change. Events are queued from the moment of the call, before the first read, so none is lost between.
 *
 * Expiry needs no server-side timer: the watch knows every instance's ttlAt and re-reads the service when the
 * earliest one passes. An instance that is gone then is reported "expired"; one that was renewed meanwhile (renewals
 * are published only now and then, see shouldPublishRenew) is sent as a "renew" with its new ttlAt. So an expiry is
 * delivered within a few milliseconds of the ttl, on every store, whoever else is running; and the ttlAt a client
 * holds is out of date by no more than that: a stream silent past the earliest ttlAt its client holds has stalled
 * (the registry client reconnects then). At most one such renew per instance and ttl reaches a watcher.
 */
export async function* watchInstances(
  store: RegistryStore,
  namespace: string,
  serviceId: string,
  signal: AbortSignal,
  now: () => number = Date.now,
): AsyncGenerator<InstanceWatchEvent> {
  let queue: (RegistryChange | "resync")[] = [];
  let wake: (() => void) | undefined;
  const onChange = (c: RegistryChange) => {
    if (c.namespace !== namespace || c.serviceId !== serviceId || !isInstanceOp(c.op)) return;
    // Bounded: a watcher that does not read costs a bounded amount of memory however many changes arrive.
    if (queue.length >= MAX_QUEUED_CHANGES) queue = ["resync"];
    else queue.push(c);
    wake?.();
  };
  const onResync = () => {
    queue = ["resync"]; // the re-read it asks for covers everything queued before it
    wake?.();
  };
  const unsubscribe = store.subscribe(onChange, onResync);
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort, { once: true });

  /** The next change, or "timeout" after `waitMs` (none: wait for a change), or undefined once aborted. */
  const next = (waitMs: number | undefined) =>
    new Promise<RegistryChange | "resync" | "timeout" | undefined>((resolve) => {
      const take = () => {
        if (signal.aborted) return resolve(undefined);
        const event = queue.shift();
        if (event !== undefined) return resolve(event);
        return false;
      };
      if (take() !== false) return;
      const timer = waitMs === undefined ? undefined : setTimeout(() => ((wake = undefined), resolve("timeout")), Math.max(0, waitMs));
      wake = () => {
        if (take() === false) return;
        clearTimeout(timer);
        wake = undefined;
      };
    });

  try {
    const known = new KnownInstances();
    // The first read fails the watch; later ones wait out a store outage (a failover) instead of ending it. Expiry
    // re-reads are shared with the service's other watches; `known` is this watch's own copy.
    const list = (at = now()) => store.listInstances(namespace, serviceId, at);
    /** The due instances as read again (shared): one by one when they are few, else the whole service at once. */
    const rereadDue = (due: InstanceRecord[]) =>
      readThroughOutage(async () => {
        if (due.length > known.byId.size * WHOLE_READ_SHARE) {
          const { at, byId } = await readShared(store, namespace, serviceId, now(), list);
          return due.map((had) => ({ at, record: byId.get(had.instanceId) }));
        }
        const ids = due.map((had) => had.instanceId);
        return readDueShared(store, namespace, serviceId, ids, (id, at) => store.getInstance(namespace, serviceId, id, at), now);
      }, signal);
    const first = await list();
    await known.reset(first, await hashesOf(first));
    yield { op: "current", instances: first, hash: known.hash() };

    // The earliest ttl known. A renewal without an event leaves an older ttl known: the step then reads the instance
    // again and sends it with its new ttl.
    let earliest = known.earliest();
    let lastExpiryRead = Number.NEGATIVE_INFINITY;
    while (!signal.aborted) {
      // the next step of the grid after the earliest ttl (see readShared), and not within a step of the last re-read
      const due = earliest === undefined ? undefined : Math.max(earliest + EXPIRY_SLACK_MS, lastExpiryRead + MIN_EXPIRY_REREAD_MS);
      const wait = due === undefined ? undefined : Math.ceil(due / MIN_EXPIRY_REREAD_MS) * MIN_EXPIRY_REREAD_MS - now();
      const event = await next(wait);
      if (event === undefined) break;
      if (event === "resync") {
        // Every watch of the process resyncs at once after the feed's interruption: the re-reads and their lists go
        // out over several turns of the event loop (200 watches of 1,000 instances held it ~240 ms in one piece).
        await paceFanOut(Math.max(known.byId.size, 1) * INSTANCE_JSON_BYTES);
        // its own read, as of now: the state after an interruption, not one shared from before it
        const fresh = await readThroughOutage(() => list(), signal);
        await known.reset(fresh, await hashesOf(fresh));
        earliest = known.earliest();
        yield { op: "resync", instances: fresh, hash: known.hash() };
      } else if (event === "timeout") {
        lastExpiryRead = now();
        const due = known.takeDue(lastExpiryRead);
        const reads = due.length === 0 ? [] : await rereadDue(due);
        // each with the digest after its own change: the client applies them one by one
        const changes: InstanceWatchEvent[] = [];
        due.forEach((had, i) => {
          const { at, record: r } = reads[i];
          // An id taken twice (two heap entries of one ttl, see KnownInstances) is judged once.
          if (known.byId.get(had.instanceId) !== had) return;
          // Renewed without an event (throttled): sent as it is now, new ttl and all (a metadata change read with it
          // is then known, and its own event finds nothing new). Missing from the read: expired if its ttl had passed
          // then; else the (shared) read was older than its ttl, or its deregister event is on its way — it stays due.
          if (!r && had.ttlAt !== undefined && had.ttlAt <= at) {
            known.delete(had.instanceId);
            changes.push({ op: "expired", instanceId: had.instanceId, hash: known.hash() });
          } else if (r && (r.ttlAt !== had.ttlAt || r.ttlMs !== had.ttlMs)) {
            known.set(r);
            changes.push({ op: "renew", instance: r, hash: known.hash() });
          } else known.set(had);
        });
        earliest = known.earliest();
        yield* changes;
      } else if (event.op === "deregister" || event.op === "expired") {
        if (known.delete(event.instanceId!)) yield { op: event.op, instanceId: event.instanceId!, hash: known.hash() };
        earliest = known.earliest();
      } else {
        // register, renew, metadata: send the instance as it is now. Gone already: its deregister or expired event
        // follows, or the ttl known for it passes and the re-read finds it gone.
        const r = await readThroughOutage(() => readInstanceOf(event, () => store.getInstance(namespace, serviceId, event.instanceId!, now())), signal);
        // An event published before the first read (or before a re-read) arrives after it: what it announces is known.
        if (!r || sameInstance(known.byId.get(r.instanceId), r)) continue;
        known.set(r);
        earliest = known.earliest();
        yield { op: event.op as "register" | "renew" | "metadata", instance: r, hash: known.hash() };
      }
    }
  } finally {
    unsubscribe();
    signal.removeEventListener("abort", onAbort);
  }
}
