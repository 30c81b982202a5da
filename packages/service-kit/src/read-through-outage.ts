import { StoreUnavailableError } from "./errors.js";

const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 2000;

/**
 * A read inside an open watch, retried while the store is unavailable (a Redis failover: the slot's new master takes
 * over within seconds), until it answers or `signal` aborts (then the abort's reason is thrown). A watch exists so
 * that its clients need not poll: an outage half way must delay its next message, not end it with `unavailable` and
 * leave each client to reopen. The watch's first read is not passed through here: a watch that cannot start says so.
 */
export async function readThroughOutage<T>(read: () => Promise<T>, signal: AbortSignal): Promise<T> {
  for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, MAX_PAUSE_MS)) {
    try {
      return await read();
    } catch (err) {
      if (!(err instanceof StoreUnavailableError) || signal.aborted) throw err;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, pause);
      timer.unref(); // a watch waiting out an outage does not hold a stopping process
      function done() {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      }
      signal.addEventListener("abort", done, { once: true });
    });
    if (signal.aborted) throw signal.reason;
  }
}
