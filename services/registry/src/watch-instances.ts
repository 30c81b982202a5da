import { readThroughOutage } from "@gov/service-kit";
import type { InstanceRecord, RegistryChange, RegistryStore } from "./store/registry-store.js";
import { isInstanceOp } from "./store/registry-store.js";

/** What a watch of one service's instances yields. */
export type InstanceWatchEvent =
  | { op: "current" | "resync"; instances: InstanceRecord[] }
  | { op: "register" | "renew" | "metadata"; instance: InstanceRecord }
  | { op: "deregister" | "expired"; instanceId: string };

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
 * Unread changes a watch keeps; a watcher that falls further behind gets one resync (the whole state) instead. The
 * change objects are the feed's, shared by every watch: a queue costs a slot per change. Large enough that a sweep
 * expiring hundreds of one service's instances at once reaches each watch as that many small events, not as a
 * resync of the whole service per watch (20 watches of 10,000 instances: ~50 MB of messages at once).
 */
export const MAX_QUEUED_CHANGES = 2048;

/** Past an instance's ttlAt, how long the watch waits before it re-reads (so the store's clock has passed it too). */
const EXPIRY_SLACK_MS = 5;

/**
 * Least time between two expiry re-reads of one watch. Each re-read costs the whole service: with thousands of
 * instances expiring one after another, re-reading at each ttl kept the event loop busy for seconds. Expiries that fall
 * within one such pause are reported together, still well within a second of their ttl.
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

function readShared(store: RegistryStore, namespace: string, serviceId: string, at: number, read: (at: number) => Promise<InstanceRecord[]>): SharedRead {
  let reads = sharedReads.get(store);
  if (!reads) sharedReads.set(store, (reads = new Map()));
  const key = `${namespace}\u0000${serviceId}`;
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

/** The earliest ttlAt of `records` (undefined: none expires). */
function earliestTtl(records: Iterable<InstanceRecord>): number | undefined {
  let earliest: number | undefined;
  for (const r of records) if (r.ttlAt !== undefined && (earliest === undefined || r.ttlAt < earliest)) earliest = r.ttlAt;
  return earliest;
}

/**
 * The instances of one service as they change, until `signal` aborts: first "current" (every live instance), then one
 * event per change. Events are queued from the moment of the call, before the first read, so none is lost between.
 *
 * Expiry needs no server-side timer: the watch knows every instance's ttlAt and re-reads the service when the
 * earliest one passes. An instance that is gone then is reported "expired"; one that was renewed meanwhile (renewals
 * are published only now and then, see shouldPublishRenew) just gets its new ttlAt. So an expiry is delivered within
 * a few milliseconds of the ttl, on every store, whoever else is running.
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
    let known = new Map<string, InstanceRecord>();
    // The first read fails the watch; later ones wait out a store outage (a failover) instead of ending it. Expiry
    // re-reads are shared with the service's other watches; `known` is this watch's own copy.
    const list = (at = now()) => store.listInstances(namespace, serviceId, at);
    const rereadShared = () => readThroughOutage(() => readShared(store, namespace, serviceId, now(), list), signal);
    const first = await list();
    known = new Map(first.map((r) => [r.instanceId, r]));
    yield { op: "current", instances: first };

    // A lower bound of the ttls known (exact after every re-read): a renewal or a removal of the earliest instance can
    // only make the timer fire early, and the re-read then finds nothing expired. Kept so, a change costs no scan.
    let earliest = earliestTtl(known.values());
    let lastExpiryRead = Number.NEGATIVE_INFINITY;
    while (!signal.aborted) {
      // the next step of the grid after the earliest ttl (see readShared), and not within a step of the last re-read
      const due = earliest === undefined ? undefined : Math.max(earliest + EXPIRY_SLACK_MS, lastExpiryRead + MIN_EXPIRY_REREAD_MS);
      const wait = due === undefined ? undefined : Math.ceil(due / MIN_EXPIRY_REREAD_MS) * MIN_EXPIRY_REREAD_MS - now();
      const event = await next(wait);
      if (event === undefined) break;
      if (event === "resync") {
        // its own read, as of now: the state after an interruption, not one shared from before it
        const fresh = await readThroughOutage(() => list(), signal);
        known = new Map(fresh.map((r) => [r.instanceId, r]));
        earliest = earliestTtl(known.values());
        yield { op: "resync", instances: fresh };
      } else if (event === "timeout") {
        lastExpiryRead = now();
        const { at, byId } = await rereadShared();
        const expired: string[] = [];
        for (const [id, had] of known) {
          const r = byId.get(id);
          // Renewed without an event (throttled): only its new ttl is taken. Anything else that changed (metadata) has
          // an event on its way, which must still find the difference and be sent, not be swallowed here. Missing
          // from the read: expired if its ttl had passed then; else it came after the (shared) read, or its deregister
          // event is on its way.
          if (!r) {
            if (had.ttlAt !== undefined && had.ttlAt <= at) expired.push(id);
          }
          else if (r.ttlAt !== had.ttlAt || r.ttlMs !== had.ttlMs) known.set(id, { ...had, ttlAt: r.ttlAt, ttlMs: r.ttlMs });
        }
        for (const id of expired) known.delete(id);
        earliest = earliestTtl(known.values());
        for (const id of expired) yield { op: "expired", instanceId: id };
      } else if (event.op === "deregister" || event.op === "expired") {
        if (known.delete(event.instanceId!)) yield { op: event.op, instanceId: event.instanceId! };
      } else {
        // register, renew, metadata: send the instance as it is now. Gone already: its deregister or expired event
        // follows, or the ttl known for it passes and the re-read finds it gone.
        const r = await readThroughOutage(() => readInstanceOf(event, () => store.getInstance(namespace, serviceId, event.instanceId!, now())), signal);
        // An event published before the first read (or before a re-read) arrives after it: what it announces is known.
        if (!r || sameInstance(known.get(r.instanceId), r)) continue;
        known.set(r.instanceId, r);
        if (r.ttlAt !== undefined && (earliest === undefined || r.ttlAt < earliest)) earliest = r.ttlAt;
        yield { op: event.op as "register" | "renew" | "metadata", instance: r };
      }
    }
  } finally {
    unsubscribe();
    signal.removeEventListener("abort", onAbort);
  }
}
