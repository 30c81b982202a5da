import type { ConfigChange, ConfigStore } from "./store/config-store.js";

/** A change that matched, or "resync": the store's event feed was interrupted, so changes may have been missed. */
export type WatchEvent = ConfigChange | "resync";

const keyOf = (c: ConfigChange) => `${c.namespace}\u0000${c.configId}`;

/**
 * Whether `later` follows `earlier` (same config) only because the config's numbering started again in between: its
 * history went with its namespace (a forced namespace delete), so versions count from 1 again. Versions otherwise only
 * grow — but for the remove of a version, which carries the version it removed.
 */
const restartsNumbering = (earlier: ConfigChange, later: ConfigChange) =>
  later.version < earlier.version || (later.version === earlier.version && !(later.op === "remove" && earlier.op !== "remove"));

/**
 * Unread events a watch keeps exactly; beyond this, each config's older unread changes are dropped (see below). The
 * events are shared by every watch (one object per change), so a full queue costs a watcher its slots, ~8 KB. At 64, a
 * burst of 200 writes at 500 a second on Redis lost 64 versions for every watcher, a fast one too: the server reads
 * each version it sends, and fell that far behind the burst.
 */
export const MAX_QUEUED_EVENTS = 1024;

/** The queued events of one watch; `close()` ends its subscription (also when nobody iterated: see watchChanges). */
export interface WatchedChanges extends AsyncIterable<WatchEvent> {
  close(): void;
  /** Events queued and not yet read: more changes have landed since the one being handled. */
  readonly pending: number;
}

/**
 * The store's change events that match `filter`, as an async iterable that ends when `signal` aborts.
 * Events are queued from the moment of the call, so a caller can subscribe first and read state second — and so the
 * caller must `close()` it when it stops before iterating to the end (a failed first read, a consumer that took only
 * the first message): the subscription exists from this call on, not from the first `next()`.
 *
 * Bounded, so that a watcher that does not read costs a bounded amount of memory however many changes arrive: a
 * reader that keeps up gets every change, in order; once more than MAX_QUEUED_EVENTS are unread, only the newest
 * unread change per config is kept (a watcher needs the newest state, not every step to it) — or a resync, when the
 * changes dropped so are of an earlier numbering of the config (see restartsNumbering). A resync replaces every
 * change queued before it (the re-read it asks for covers them) and comes before the changes that arrive after it.
 */
export function watchChanges(store: ConfigStore, filter: (c: ConfigChange) => boolean, signal: AbortSignal): WatchedChanges {
  let queue: WatchEvent[] = [];
  let wake: (() => void) | undefined;
  const onChange = (c: ConfigChange) => {
    if (!filter(c)) return;
    if (queue.length >= MAX_QUEUED_EVENTS) {
      const key = keyOf(c);
      let restarted = false;
      queue = queue.filter((e) => {
        if (e === "resync" || keyOf(e) !== key) return true;
        restarted ||= restartsNumbering(e, c);
        return false;
      });
      // The newest change alone would then pass for one the watcher has already seen (its version is not above what it
      // was shown before the numbering started again) while the remove that told it so is dropped: a resync re-reads.
      if (restarted) return onResync();
    }
    queue.push(c);
    wake?.();
  };
  const onResync = () => {
    queue = ["resync"];
    wake?.();
  };
  const unsubscribe = store.subscribe(onChange, onResync);
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort, { once: true });
  const close = () => {
    unsubscribe();
    signal.removeEventListener("abort", onAbort);
  };
  return {
    close,
    get pending() {
      return queue.length;
    },
    async *[Symbol.asyncIterator]() {
      try {
        while (!signal.aborted) {
          const event = queue.shift();
          if (event !== undefined) {
            yield event;
            continue;
          }
          await new Promise<void>((r) => (wake = r));
          wake = undefined;
        }
      } finally {
        close();
      }
    },
  };
}
