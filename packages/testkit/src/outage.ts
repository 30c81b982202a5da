import { StoreUnavailableError } from "@gov/redis";

export interface StoreOutage {
  /** While true, the wrapped calls refuse as a Redis store does when Redis cannot be reached. */
  down: boolean;
  /** Calls refused so far. */
  refused: number;
  /** `call` as it is while the store is up; refused with StoreUnavailableError while `down`. */
  failing<A extends unknown[], R>(call: (...args: A) => Promise<R>): (...args: A) => Promise<R>;
}

/**
 * A store outage switched by the test: wrap a store's methods with `failing` (its other methods keep working, as the
 * nodes of a Cluster that did not fail do) and set `down`. Real stores' own outage answers are tested against real
 * Redis; this is for what their callers do with one at an exact moment.
 */
export function storeOutage(): StoreOutage {
  const outage: StoreOutage = {
    down: false,
    refused: 0,
    failing: (call) => (...args) => {
      if (!outage.down) return call(...args);
      outage.refused++;
      return Promise.reject(new StoreUnavailableError("Redis at 127.0.0.1:1 is unavailable (test): retry when it is back"));
    },
  };
  return outage;
}
