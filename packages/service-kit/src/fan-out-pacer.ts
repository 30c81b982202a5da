/**
 * Bytes of stream messages let out in one turn of the event loop before the next message waits for the next turn. A
 * change to a large config fans out to every watcher in the same turn — each watcher's message is written to its
 * socket in the microtasks that follow — and 300 watchers of a 1 MiB config held the loop ~270–300 ms (every other
 * request waited), though each message was serialized once. Writing a MiB into a loopback socket costs ~1 ms, so a
 * turn now writes about 8 ms of them, and other requests are served in between.
 */
export const FAN_OUT_BYTES_PER_TURN = 8 * 1024 * 1024;

/**
 * Returns `pace(bytes)`: call it before handing a stream message of about `bytes` to its receiver; it resolves at once
 * while this turn's budget lasts (a first message always goes, however large), and otherwise in a later turn, first
 * come first served. Small messages never wait in practice: 8 MiB is ~4,000 messages of 2 KiB in one turn.
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
