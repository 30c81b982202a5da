/** One acknowledged write of a {@link writeStream}: its number, when it was issued and when it was acknowledged. */
export interface AckedWrite {
  i: number;
  issued: number;
  at: number;
}

export interface WriteStream {
  /** Every acknowledged write, in the order of acknowledgement. */
  readonly acked: AckedWrite[];
  /** Failure messages and how often each came (failed writes are not acknowledged: the caller may not count on them). */
  readonly errors: Map<string, number>;
  /** How many writes issued after `t` (performance.now()) were acknowledged. */
  after(t: number): number;
  /** Stops issuing and resolves when every writer has finished its last write. */
  stop(): Promise<void>;
}

/**
 * Runs `write(0)`, `write(1)`, … from `concurrency` writers until `stop()`, for fault tests that must re-read every
 * acknowledged write after the fault: a write that resolves is acknowledged, one that throws is not (its writer
 * pauses 20 ms, so an outage is not a busy loop).
 */
export function writeStream(write: (i: number) => Promise<unknown>, concurrency = 4): WriteStream {
  const acked: AckedWrite[] = [];
  const errors = new Map<string, number>();
  let next = 0;
  let stopped = false;
  const writer = async () => {
    while (!stopped) {
      const i = next++;
      const issued = performance.now();
      try {
        await write(i);
        acked.push({ i, issued, at: performance.now() });
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        errors.set(message, (errors.get(message) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  };
  const done = Promise.all(Array.from({ length: concurrency }, writer)).then(() => {});
  return {
    acked,
    errors,
    after: (t) => acked.filter((a) => a.issued > t).length,
    stop: () => ((stopped = true), done),
  };
}
