import type { RegistryStore } from "./store/registry-store.js";

/** What a keepalive stream reports to its client: the instance's expiry after each registration or renewal. */
export interface KeepaliveBeat {
  /** Undefined once the instance is fixed (re-registered as such meanwhile): it never expires, and says so. */
  ttlAt?: number;
}

export interface KeepaliveTarget {
  namespace: string;
  serviceId: string;
  instanceId: string;
  ttlMs: number;
}

/** Thrown when a renewal finds the instance gone (deregistered, or expired during a long store outage). */
export class KeptInstanceGone extends Error {}

/**
 * Renews an already registered instance while its stream is open: every third of its ttl on the server's own timer,
 * and at once on each client ping (`pings` yields one item per ping and ends when the client closes its side).
 * Yields the new expiry after each renewal; ends when the client closes its side or `signal` aborts (client gone,
 * server shutting down). On the way out, however it ends, the instance is renewed one last time and NOT removed: it
 * expires one ttl after the stream ended, so a client that reconnects within that time (a network blip, a restart
 * of this server) keeps it without a gap. A renewal that fails on a store outage is retried at the next tick; the
 * instance only goes when the outage outlasts its ttl, and then the stream ends with KeptInstanceGone.
 */
export async function* keepInstanceAlive(
  store: RegistryStore,
  target: KeepaliveTarget,
  pings: AsyncIterator<unknown>,
  signal: AbortSignal,
  now: () => number,
): AsyncGenerator<KeepaliveBeat> {
  const { namespace, serviceId, instanceId, ttlMs } = target;
  const renewEveryMs = Math.max(100, Math.floor(ttlMs / 3));
  const aborted = new Promise<"closed">((resolve) => {
    if (signal.aborted) resolve("closed");
    else signal.addEventListener("abort", () => resolve("closed"), { once: true });
  });
  // A failed read of the client's side (reset stream, dead connection) is the same as the client closing it.
  const nextPing = () =>
    pings.next().then(
      (r) => (r.done ? ("closed" as const) : ("ping" as const)),
      () => "closed" as const,
    );
  let ping = nextPing();
  let timer: NodeJS.Timeout | undefined;
  try {
    for (;;) {
      const tick = new Promise<"tick">((resolve) => (timer = setTimeout(() => resolve("tick"), renewEveryMs)));
      const why = await Promise.race([ping, tick, aborted]);
      clearTimeout(timer);
      if (why === "closed" || signal.aborted) return;
      if (why === "ping") ping = nextPing();
      let renewed;
      try {
        renewed = await store.renew(namespace, serviceId, instanceId, now());
      } catch {
        continue; // store outage: the instance lives until its ttlAt; the next tick tries again
      }
      if (!renewed) throw new KeptInstanceGone();
      // (a fixed instance has no expiry: none is made up for it — one ttl from now was reported, for ever)
      yield { ttlAt: renewed.ttlAt };
    }
  } finally {
    clearTimeout(timer);
    // One TTL from the end of the stream, not from the last periodic renewal: "expires one ttl after it closed".
    await store.renew(namespace, serviceId, instanceId, now()).catch(() => undefined);
  }
}
