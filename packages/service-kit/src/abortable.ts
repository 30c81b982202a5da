/**
 * `it.next()`, or a rejection with `reason()` once `signal` aborts, whichever comes first.
 *
 * The abort listener lives for this one step and is removed when `it.next()` settles. Racing every step against one
 * promise that lives as long as the stream (`Promise.race([it.next(), aborted])`) would attach a reaction to that
 * promise per step, each holding its step's result: every message a stream delivered would stay reachable until the
 * stream ended.
 */
export function nextUnlessAborted<T>(it: AsyncIterator<T>, signal: AbortSignal, reason: () => unknown): Promise<IteratorResult<T>> {
  if (signal.aborted) return Promise.reject(reason());
  return new Promise<IteratorResult<T>>((resolve, reject) => {
    const next = it.next(); // a synchronous throw rejects this promise, before any listener is added
    const onAbort = () => reject(reason());
    signal.addEventListener("abort", onAbort, { once: true });
    next.then(
      (result) => {
        signal.removeEventListener("abort", onAbort);
        resolve(result);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/**
 * `stream`, ending with `reason()` as soon as `signal` aborts (even while it waits for its next message); the producer
 * is then told to stop (`return()`, not awaited: it may be waiting for an event that never comes). Retains nothing
 * of what it delivered.
 */
export async function* untilAborted<T>(stream: AsyncIterable<T>, signal: AbortSignal, reason: () => Error): AsyncIterable<T> {
  const it = stream[Symbol.asyncIterator]();
  let finished = false;
  try {
    for (;;) {
      const next = await nextUnlessAborted(it, signal, reason);
      if (next.done) {
        finished = true;
        return;
      }
      yield next.value;
    }
  } finally {
    if (!finished) void Promise.resolve(it.return?.()).catch(() => {});
  }
}
