/**
 * Bytes of stream messages let out in one turn of the event loop before the next message waits for the next turn. A
 * change to a large config fans out to every watcher in the same turn — each watcher's message is serialized (Connect
 * and gRPC streams do it per watcher; SSE once) and written to its socket in the microtasks that follow — and 200
 * watchers of a 1 MiB config held the loop ~250 ms on SSE, ~500 ms on gRPC-Web and ~800 ms on a Connect JSON stream:
 * every other request waited. A MiB costs ~1 ms to write and up to ~4 ms to serialize and write, so a turn now lets out
 * 2 MiB, and other requests are served in between (the same fan-out: 15–23 ms at most).
 */
export const FAN_OUT_BYTES_PER_TURN = 2 * 1024 * 1024;

/**
 * Returns `pace(bytes)`: call it before handing a stream message of about `bytes` to its receiver; it resolves at once
 * while this turn's budget lasts (a first message always goes, however large), and otherwise in a later turn, first
 * come first served. Small messages seldom wait: 2 MiB is ~1,000 messages of 2 KiB in one turn. Services call it,
 * not a transport interceptor: the work to spread may begin before the message exists (a registry resync re-reads its
 * whole list first), and an interceptor sees only the made message.
 */
export function fanOutPacer(bytesPerTurn = FAN_OUT_BYTES_PER_TURN): (bytes: number) => Promise<void> | undefined {
  let spent = 0;
  let nextTurn: Promise<void> | undefined;
  const newTurn = () => {
    spent = 0;
    nextTurn = undefined;
  };
  const pace = (bytes: number): Promise<void> | undefined => {
    if (spent === 0) setImmediate(newTurn); // the budget is per turn: it starts again in the turn's check phase
    else if (spent + bytes > bytesPerTurn) return (nextTurn ??= new Promise((resolve) => setImmediate(resolve))).then(() => pace(bytes));
    spent += bytes;
    return undefined;
  };
  return pace;
}

/** The process's pacer: one budget per turn for every service's streams, as the stall it bounds is the process's. */
export const paceFanOut = fanOutPacer();
