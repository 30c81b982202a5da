import type { RedisClient } from "@gov/redis";
import { outageLogFields, type Logger } from "@gov/service-kit";
import Redlock, { type Lock } from "redlock";

/**
 * The cluster-wide mutex named `stat` (seed: Limits): only its holder runs the statistics job. A holder keeps it
 * across periods, extending it while it lives, and releases it at shutdown; a holder that dies stops extending, its
 * lock expires after `ttlMs`, and the next worker that asks takes it.
 */
export interface StatMutex {
  /** true while this process holds the mutex; acquires it when it is free. Never throws (a failure is "not held"). */
  hold(): Promise<boolean>;
  /** Aborted when a held mutex is lost (an extension failed): work started under it should stop. */
  readonly lost: AbortSignal;
  /**
   * Whether the mutex is still this process's by its own clock, without a round trip: false once the lock's validity
   * has run out, even before a failed extension says so. A process suspended past the lock's TTL (SIGSTOP, a VM
   * pause, a long GC) resumes with its timers not yet run and `lost` not yet aborted, while another worker already
   * holds the mutex: checked right before each write, it keeps such a process from writing what it read before.
   */
  holds(): boolean;
  /** Releases a held mutex and stops extending it. */
  release(): Promise<void>;
}

/** Held for ever: the embedded store has one process, and `mutex.redis.enabled=false` means every worker works. */
export function alwaysHeldMutex(): StatMutex {
  return { hold: async () => true, lost: new AbortController().signal, holds: () => true, release: async () => {} };
}

export interface RedlockMutexOptions {
  /** The Redis key of the lock: in the system namespace's slot. */
  key: string;
  /** How long the lock outlives its holder's last extension (default 5 s): the takeover delay after a crash. */
  ttlMs?: number;
  logger: Logger;
}

/** The `stat` mutex on Redis (standalone or Cluster) with redlock: one client, so a quorum of one. */
export function redlockMutex(client: RedisClient, options: RedlockMutexOptions): StatMutex {
  const ttlMs = options.ttlMs ?? 5000;
  // No retries: a worker that finds the mutex taken simply asks again at its next tick.
  const redlock = new Redlock([client], { retryCount: 0, driftFactor: 0.01 });
  let lock: Lock | undefined;
  // The held lock's validity, kept here: redlock zeroes the `expiration` of the lock it extends as soon as the
  // extension starts, a few promise steps before the new lock is handed back, and every check in that gap read "not
  // held" — a complete pass skipped the namespaces it came to then, and `hold()` dropped a good lock.
  let validUntil = 0;
  let extender: NodeJS.Timeout | undefined;
  let lost = new AbortController();

  const drop = (reason: string, err?: unknown) => {
    if (!lock) return;
    lock = undefined;
    clearInterval(extender);
    lost.abort();
    // expected whenever Redis cannot be reached for a while: the reason, not redlock's stack
    options.logger.warn({ ...(err === undefined ? {} : outageLogFields(err, true)), mutex: "stat" }, `lost the stat mutex: ${reason}`);
  };
  const extend = async () => {
    const held = lock;
    if (!held) return;
    try {
      const extended = await held.extend(ttlMs);
      if (lock !== held) return; // released or dropped meanwhile
      lock = extended;
      validUntil = extended.expiration;
    } catch (err) {
      // Another worker may take over once the lock expires; this one stops working until it holds it again.
      if (lock === held) drop("it could not be extended", err);
    }
  };

  /** Held, and within its validity by this process's clock (a lost lock is dropped: `lock` is then undefined). */
  const valid = () => lock !== undefined && validUntil > Date.now();

  return {
    get lost() {
      return lost.signal;
    },
    holds: valid,
    async hold() {
      if (valid()) return true;
      if (lock) drop("it expired before it could be extended");
      try {
        lock = await redlock.acquire([options.key], ttlMs);
        validUntil = lock.expiration;
      } catch {
        return false; // held by another worker (or Redis is unreachable: then nobody can work anyway)
      }
      lost = new AbortController();
      extender = setInterval(() => void extend(), Math.floor(ttlMs / 3));
      extender.unref();
      options.logger.info({ mutex: "stat", ttlMs }, "acquired the stat mutex: this process runs the statistics job");
      return true;
    },
    async release() {
      const held = lock;
      lock = undefined;
      clearInterval(extender);
      if (!held) return;
      try {
        await held.release();
        options.logger.info({ mutex: "stat" }, "released the stat mutex");
      } catch (err) {
        options.logger.warn({ ...outageLogFields(err, true), mutex: "stat" }, `the stat mutex could not be released: it expires within ${ttlMs} ms`);
      }
    },
  };
}
