import type { ConfigChange, ConfigStore } from "./store/config-store.js";

/** A change that matched, or "resync": the store's event feed was interrupted, so changes may have been missed. */
export type WatchEvent = ConfigChange | "resync";

/**
 * The store's change events that match `filter`, as an async iterable that ends when `signal` aborts.
 * Events are queued from the moment of the call, so a caller can subscribe first and read state second.
 */
export function watchChanges(store: ConfigStore, filter: (c: ConfigChange) => boolean, signal: AbortSignal): AsyncIterable<WatchEvent> {
  const queue: WatchEvent[] = [];
  let wake: (() => void) | undefined;
  const push = (e: WatchEvent) => {
    queue.push(e);
    wake?.();
  };
  const unsubscribe = store.subscribe(
    (c) => filter(c) && push(c),
    () => push("resync"),
  );
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort, { once: true });
  return {
    async *[Symbol.asyncIterator]() {
      try {
        while (!signal.aborted) {
          if (queue.length === 0) await new Promise<void>((r) => (wake = r));
          wake = undefined;
          while (queue.length > 0 && !signal.aborted) yield queue.shift()!;
        }
      } finally {
        unsubscribe();
        signal.removeEventListener("abort", onAbort);
      }
    },
  };
}
