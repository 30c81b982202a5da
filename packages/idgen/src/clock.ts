/** Wall-clock milliseconds. Injectable so tests can move time (and move it backwards). */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Monotonic milliseconds for deadlines (lease stop rule). A wall-clock step must never make a lost lease look
 * alive, so the guarder measures elapsed time here, not with `Date.now()`.
 */
export type MonotonicNow = () => number;

export const monotonicNow: MonotonicNow = () => performance.now();
