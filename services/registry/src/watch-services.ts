import { readThroughOutage } from "@gov/service-kit";
import { memberHash, SetDigest } from "./state-digest.js";
import type { RegistryChange, RegistryStore } from "./store/registry-store.js";

/**
 * What a watch of a namespace's service list yields; `hash` is the digest of the service ids the client holds once it
 * has applied the event.
 */
export type ServiceWatchEvent = ({ op: "current" | "resync"; serviceIds: string[] } | { op: "add" | "remove"; serviceId: string }) & { hash: string };

const digestOf = (serviceIds: readonly string[]) => SetDigest.of(serviceIds.map(memberHash));

/**
 * One read of a namespace's service list, shared by the namespace's watches (read-only). `previous` is the read before
 * it (only that one: the chain is cut behind it), so that watches which had sent that one's list share one diff too.
 */
interface SharedRead {
  readonly begun: number;
  readonly ids: Promise<string[]>;
  previous: SharedRead | undefined;
  /** What changed since `previous`, worked out once (by the first watch that needs it). */
  diff?: Promise<{ removed: string[]; added: string[] }>;
}

/** Reads of service lists begun so far, by every watch: orders reads against the changes the watches note. */
let readsBegun = 0;
/** The latest read of each watched namespace, and how many watches it has (the entry goes with the last). */
const latest = new WeakMap<RegistryStore, Map<string, { read?: SharedRead; watches: number }>>();

function namespaceOf(store: RegistryStore, namespace: string) {
  let namespaces = latest.get(store);
  if (!namespaces) latest.set(store, (namespaces = new Map()));
  let entry = namespaces.get(namespace);
  if (!entry) namespaces.set(namespace, (entry = { watches: 0 }));
  return { entry, forget: () => namespaces.delete(namespace) };
}

/**
 * The namespace's service list from a read begun after read number `after`: the latest one if it began since (the
 * namespace's watches wake on the same event, and each would otherwise read the whole list), else a new one.
 */
function readSince(entry: { read?: SharedRead }, store: RegistryStore, namespace: string, after: number): SharedRead {
  const current = entry.read;
  if (current && current.begun > after) return current;
  if (current) current.previous = undefined; // keep one step of history, not all of it
  const read: SharedRead = { begun: ++readsBegun, ids: store.listServices(namespace), previous: current };
  read.ids.catch(() => entry.read === read && (entry.read = undefined)); // a failed read is not shared
  entry.read = read;
  return read;
}

function diffOf(before: readonly string[], now: readonly string[]): { removed: string[]; added: string[] } {
  const was = new Set(before);
  const is = new Set(now);
  return { removed: before.filter((id) => !is.has(id)), added: now.filter((id) => !was.has(id)) };
}

/**
 * The service ids of one namespace as they change, until `signal` aborts: first "current" (every service id), then
 * "add" and "remove" per change; "resync" (every service id as it is now) after the store's event feed was lost.
 *
 * Events are noted from the moment of the call, before the first read, so none is lost between. An event does not say
 * what the list is now (one published before the first read arrives after it), so each wakes a re-read of the list,
 * and what differs from what the client was sent is reported: a stale or repeated event reports nothing, and many
 * events that arrive together cost one read. A watcher that does not read therefore holds no queue at all, just a flag.
 * The namespace's watches share their reads and, when they had sent the same list, the work of comparing the lists.
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
  const shared = namespaceOf(store, namespace);
  shared.entry.watches++;
  try {
    // The first read fails the watch; a read begun from now on (another watch's may serve).
    let sent = readSince(shared.entry, store, namespace, readsBegun);
    let known = await sent.ids;
    let digest = digestOf(known);
    yield { op: "current", serviceIds: known, hash: digest.hex() };
    while (!signal.aborted) {
      if (pending === "none") {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      const why = pending;
      pending = "none"; // before the read: an event arriving during it asks for another
      // A resync reads anew (the state after an interruption); a change, with any read begun since it was noted. A
      // store outage (a failover) delays the next message instead of ending the watch.
      const after = why === "resync" ? readsBegun : changedAt;
      const read = await readThroughOutage(async () => {
        const r = readSince(shared.entry, store, namespace, after);
        await r.ids;
        return r;
      }, signal);
      const fresh = await read.ids;
      if (why === "resync") {
        sent = read;
        known = fresh;
        digest = digestOf(fresh);
        yield { op: "resync", serviceIds: fresh, hash: digest.hex() };
        continue;
      }
      let diff;
      if (read.previous !== undefined && read.previous === sent) {
        // every watch that had sent the previous list: one comparison for all of them
        const previous = read.previous;
        read.diff ??= previous.ids.then((before) => diffOf(before, fresh));
        diff = await read.diff;
      } else diff = diffOf(known, fresh);
      sent = read;
      known = fresh;
      // each with the digest after its own change: the client applies them one by one
      for (const id of diff.removed) {
        digest.remove(memberHash(id));
        yield { op: "remove", serviceId: id, hash: digest.hex() };
      }
      for (const id of diff.added) {
        digest.add(memberHash(id));
        yield { op: "add", serviceId: id, hash: digest.hex() };
      }
    }
  } finally {
    unsubscribe();
    signal.removeEventListener("abort", onAbort);
    if (--shared.entry.watches === 0) shared.forget();
  }
}
