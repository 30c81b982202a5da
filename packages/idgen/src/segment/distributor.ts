import { runDurableScript, defineScript, type RedisClient } from "../redis-script.js";

/**
 * Reserves id ranges for a segment chain. `nextMaxId(count)` atomically adds `count` to a shared counter and
 * returns the new maximum; the caller owns `(maxId − count, maxId]`.
 */
export interface SegmentDistributor {
  readonly type: string;
  readonly namespace: string;
  readonly name: string;
  nextMaxId(count: number): Promise<number>;
}

export interface SegmentDistributorOptions {
  namespace: string;
  name: string;
  /** Ids start at `offset + 1` (default 0). Only applied when the counter does not exist yet. */
  offset?: number;
}

/** In-process counter: for tests, single-process services and benchmarks. */
export function memorySegmentDistributor(opts: SegmentDistributorOptions): SegmentDistributor {
  let max = opts.offset ?? 0;
  return {
    type: "memory",
    namespace: opts.namespace,
    name: opts.name,
    nextMaxId: async (count) => (max += count),
  };
}

/** The counter key: hash-tagged with the namespace like every idgen key. */
export function segmentKey(namespace: string, name: string): string {
  return `idgen:{${namespace}}:segment:${name}`;
}

/** KEYS counter; ARGV offset, count: create at offset if absent, then INCRBY in the same atomic step. */
const nextMaxIdScript = defineScript(
  "idgen_segment_next_max_id",
  1,
  `redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('INCRBY', KEYS[1], ARGV[2])`,
);

/**
 * `INCRBY` on Redis (standalone or Cluster). The store must be persistent (AOF): a counter that restarts
 * from the offset would re-issue ids; a result below the previous one is reported as an error. A durable write: with a
 * replica policy on the client (`gov.redis.min-replicas`) a range is handed out only once `WAIT` saw it on the replicas.
 * A range that `WAIT` saw on fewer is not used (UnderReplicatedWriteError): after a failover the new master, which may
 * not have it, would hand it out again. It is skipped: a gap in the ids, never an id twice.
 */
export function redisSegmentDistributor(client: RedisClient, opts: SegmentDistributorOptions): SegmentDistributor {
  const key = segmentKey(opts.namespace, opts.name);
  const offset = opts.offset ?? 0;
  let lastMaxId = -Infinity;
  return {
    type: "redis",
    namespace: opts.namespace,
    name: opts.name,
    async nextMaxId(count) {
      const maxId = Number(await runDurableScript(client, nextMaxIdScript, [key], [offset, count], { failUnderReplicated: true }));
      if (!Number.isSafeInteger(maxId)) throw new Error(`segment counter ${key} is beyond 2^53 (${maxId})`);
      if (maxId < lastMaxId + count) throw new Error(`segment counter ${key} went backwards: got ${maxId}, expected at least ${lastMaxId + count} (was the store flushed or restarted without persistence?)`);
      lastMaxId = maxId;
      return maxId;
    },
  };
}
