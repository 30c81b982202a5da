import type { ConfigChange, ConfigStore } from "./store/config-store.js";

/**
 * The store's change events that match `filter`, as an async iterable that ends when `signal` aborts.
 * Events are queued from the moment of the call, so a caller can subscribe first and read state second.
 */
export function watchChanges(store: ConfigStore, filter: (c: ConfigChange) => boolean, signal: AbortSignal): AsyncIterable<ConfigChange> {
  const queue: ConfigChange[] = [];
  let wake: (() => void) | undefined;
  const unsubscribe = store.subscribe((c) => {
    if (!filter(c)) return;
    queue.push(c);
    wake?.();
  });
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
