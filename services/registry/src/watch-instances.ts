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

/** Unread changes a watch keeps; a watcher that falls further behind gets one resync (the whole state) instead. */
export const MAX_QUEUED_CHANGES = 256;

/** Past an instance's ttlAt, how long the watch waits before it re-reads (so the store's clock has passed it too). */
const EXPIRY_SLACK_MS = 5;

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
    queue = queue.length >= MAX_QUEUED_CHANGES ? ["resync"] : [...queue, c];
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
    // The first read fails the watch; later ones wait out a store outage (a failover) instead of ending it.
    const reread = async (throughOutage = true) => {
      const list = () => store.listInstances(namespace, serviceId, now());
      const fresh = throughOutage ? await readThroughOutage(list, signal) : await list();
      return { fresh, byId: new Map(fresh.map((r) => [r.instanceId, r])) };
    };
    const first = await reread(false);
    known = first.byId;
    yield { op: "current", instances: first.fresh };

    while (!signal.aborted) {
      let earliest: number | undefined;
      for (const r of known.values()) if (r.ttlAt !== undefined && (earliest === undefined || r.ttlAt < earliest)) earliest = r.ttlAt;
      const event = await next(earliest === undefined ? undefined : earliest - now() + EXPIRY_SLACK_MS);
      if (event === undefined) break;
      if (event === "resync") {
        const { fresh, byId } = await reread();
        known = byId;
        yield { op: "resync", instances: fresh };
      } else if (event === "timeout") {
        const { byId } = await reread();
        for (const [id, had] of [...known]) {
          const r = byId.get(id);
          // Renewed without an event (throttled): only its new ttl is taken. Anything else that changed (metadata) has
          // an event on its way, which must still find the difference and be sent, not be swallowed here.
          if (r) known.set(id, { ...had, ttlAt: r.ttlAt, ttlMs: r.ttlMs });
          else {
            known.delete(id);
            yield { op: "expired", instanceId: id };
          }
        }
      } else if (event.op === "deregister" || event.op === "expired") {
        if (known.delete(event.instanceId!)) yield { op: event.op, instanceId: event.instanceId! };
      } else {
        // register, renew, metadata: send the instance as it is now. Gone already: its deregister or expired event
        // follows, or the ttl known for it passes and the re-read finds it gone.
        const r = await readThroughOutage(() => store.getInstance(namespace, serviceId, event.instanceId!, now()), signal);
        // An event published before the first read (or before a re-read) arrives after it: what it announces is known.
        if (!r || sameInstance(known.get(r.instanceId), r)) continue;
        known.set(r.instanceId, r);
        yield { op: event.op as "register" | "renew" | "metadata", instance: r };
      }
    }
  } finally {
    unsubscribe();
    signal.removeEventListener("abort", onAbort);
  }
}
