import { readThroughOutage } from "@gov/service-kit";
import type { RegistryChange, RegistryStore } from "./store/registry-store.js";

/** What a watch of a namespace's service list yields. */
export type ServiceWatchEvent = { op: "current" | "resync"; serviceIds: string[] } | { op: "add" | "remove"; serviceId: string };

/** Reads of service lists begun so far, by every watch: orders reads against the changes the watches note. */
let readsBegun = 0;
const inFlight = new WeakMap<RegistryStore, Map<string, { begun: number; ids: Promise<string[]> }>>();

/**
 * The namespace's service list from a read begun after read number `after` — one in flight if there is such (the
 * namespace's watches wake on the same event, and each would otherwise read the whole list), else a new one. Shared
 * results are read-only.
 */
function readSince(store: RegistryStore, namespace: string, after: number): Promise<string[]> {
  let reads = inFlight.get(store);
  if (!reads) inFlight.set(store, (reads = new Map()));
  const current = reads.get(namespace);
  if (current && current.begun > after) return current.ids;
  const read = { begun: ++readsBegun, ids: store.listServices(namespace) };
  reads.set(namespace, read);
  const done = () => reads.get(namespace) === read && reads.delete(namespace);
  read.ids.then(done, done);
  return read.ids;
}

/**
 * The service ids of one namespace as they change, until `signal` aborts: first "current" (every service id), then
 * "add" and "remove" per change; "resync" (every service id as it is now) after the store's event feed was lost.
 *
 * Events are noted from the moment of the call, before the first read, so none is lost between. An event does not say
 * what the list is now (one published before the first read arrives after it), so each wakes a re-read of the list,
 * and what differs from what the client was sent is reported: a stale or repeated event reports nothing, and many
 * events that arrive together cost one read. A watcher that does not read therefore holds no queue at all, just a flag.
 */
export async function* watchServices(store: RegistryStore, namespace: string, signal: AbortSignal): AsyncGenerator<ServiceWatchEvent> {
  let pending: "none" | "change" | "resync" = "none";
  /** The read count when the last change was noted: a read begun after it (by any watch of the namespace) has it. */
  let changedAt = 0;
  let wake: (() => void) | undefined;
  const onChange = (c: RegistryChange) => {
    if (c.namespace !== namespace || (c.op !== "service_add" && c.op !== "service_remove")) return;
    if (pending === "none") pending = "change";
    changedAt = readsBegun;
    wake?.();
  };
  const onResync = () => {
    pending = "resync";
    wake?.();
  };
  const unsubscribe = store.subscribe(onChange, onResync);
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    let known = await store.listServices(namespace);
    yield { op: "current", serviceIds: known };
    while (!signal.aborted) {
      if (pending === "none") {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      const why = pending;
      pending = "none"; // before the read: an event arriving during it asks for another
      const after = changedAt;
      // A store outage (a failover) delays the next message instead of ending the watch. After a change, a read of the
      // namespace's other watches serves too if it began since; a resync reads anew.
      const fresh = await readThroughOutage(() => (why === "resync" ? store.listServices(namespace) : readSince(store, namespace, after)), signal);
      if (why === "resync") {
        known = fresh;
        yield { op: "resync", serviceIds: fresh };
        continue;
      }
      const now = new Set(fresh);
      const before = new Set(known);
      known = fresh;
      for (const id of before) if (!now.has(id)) yield { op: "remove", serviceId: id };
      for (const id of fresh) if (!before.has(id)) yield { op: "add", serviceId: id };
    }
  } finally {
    unsubscribe();
    signal.removeEventListener("abort", onAbort);
  }
}
