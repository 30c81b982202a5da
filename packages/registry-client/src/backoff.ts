import { setTimeout as sleep } from "node:timers/promises";

export interface RetryOptions {
  /** First retry delay, ms (default 200). */
  initialMs?: number;
  /** Longest retry delay, ms (default 5,000). */
  maxMs?: number;
}

/** Exponential backoff with jitter (50–100 % of the step), so that many clients cut off together do not return together. */
export function backoffMs(attempt: number, { initialMs = 200, maxMs = 5_000 }: RetryOptions = {}): number {
  const step = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(step * (0.5 + Math.random() / 2));
}

/** Waits `ms`; false when `signal` aborted first. The timer does not keep the process alive on its own. */
export async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  if (ms <= 0) return true;
  try {
    await sleep(ms, undefined, { signal, ref: false });
    return true;
  } catch {
    return false;
  }
}
