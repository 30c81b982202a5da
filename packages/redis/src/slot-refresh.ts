import type { Cluster } from "ioredis";

/**
 * How often a Cluster client asks for the slot map unprompted. ioredis learns a new map only from errors it recognises
 * (MOVED, a closed connection); a master that freezes rather than dies sends none — its commands just time out — and
 * after the Cluster had promoted its replica, every write to its slots kept timing out for as long as it stayed frozen
 * (the machine-id lease was lost a few minutes later), and a subscriber on it heard nothing, unaware. A refresh costs
 * ~2.7 ms of CPU (a short connection, CLUSTER SLOTS, ioredis' 16,384-slot table), so it is not run every second on
 * every client: a timed-out command asks at once (below), and this interval catches a client that sends nothing.
 */
export const SLOTS_REFRESH_INTERVAL_MS = 5000;

/** A timed-out command asks for the slot map at most this often (each ask tries the nodes until one answers). */
const TIMEOUT_REFRESH_GAP_MS = 500;

/**
 * Keeps `cluster`'s slot map current when a master is failed over without an error reaching the client: it asks for
 * the map every SLOTS_REFRESH_INTERVAL_MS, and at once when one of its commands times out (the node that did not
 * answer may have been failed over while it was unreachable). Returns `cluster`.
 *
 * Not ioredis' own `slotsRefreshInterval`: a client quit while one of its refreshes is under way starts the next round
 * anyway, and every round after it, for good — a timer that kept a stopped process alive. This timer is unref'd and
 * ends with the client. The timeout hook is ioredis' `handleError`, through which every failure of a routed command
 * passes (a success costs nothing); a pipeline's timed-out command does not pass there, the next routed one's does.
 */
export function keepSlotsCurrent(cluster: Cluster): Cluster {
  const handleError = cluster.handleError;
  let askedAt = -Infinity;
  cluster.handleError = function (this: Cluster, error, ttl, handlers) {
    if (error.message === "Command timed out" && performance.now() - askedAt >= TIMEOUT_REFRESH_GAP_MS) {
      askedAt = performance.now();
      cluster.refreshSlotsCache(); // a refresh already under way takes this ask along
    }
    return handleError.call(this, error, ttl, handlers);
  };
  const timer = setInterval(() => cluster.status === "ready" && cluster.refreshSlotsCache(), SLOTS_REFRESH_INTERVAL_MS).unref();
  cluster.once("end", () => clearInterval(timer));
  return cluster;
}
