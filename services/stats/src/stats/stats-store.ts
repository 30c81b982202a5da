import { defineScript, prepareScripts, redisCaller, runScript, type RedisClient } from "@gov/redis";
import { CLOCK_SKEW_ALLOWANCE_MS } from "@gov/service-kit";

/** What `GET /v1/namespaces/{ns}/stat` answers: the counts of the stats worker's last pass over the namespace. */
export interface NamespaceStat {
  /** Namespaces of the server. */
  namespaces: number;
  services: { total: number; health: number };
  instances: number;
  configs: number;
}

/**
 * Where the stats worker leaves its counts, so that reads never scan: one record per namespace, and the time the
 * last pass started (any worker's), which paces the next one across a change of mutex holder.
 */
export interface StatsStore {
  readonly kind: string;
  /**
   * Replaces the namespace's counts — unless they come from an older pass than those stored: `passAt` is when the
   * pass that counted them was due. A worker suspended mid-pass (SIGSTOP, a VM pause) past the `stat` mutex's TTL may
   * resume with counts read before another worker took over and counted again; its write is then ignored, whenever
   * it lands. Without `passAt` the write always replaces. `now` is the writer's clock: stored counts whose pass is
   * later than it (beyond the hosts' allowance) were paced by a clock running ahead, and are replaced — kept, they
   * froze the namespace's counts for as long as that clock was ahead (an hour fast: an hour of the same numbers).
   */
  write(namespace: string, stat: NamespaceStat, passAt?: number, now?: number): Promise<void>;
  /**
   * Drops the counts of every namespace not in `keep` (deleted since the last pass: its stat then reads zeros, like a
   * namespace never counted). Returns how many were dropped.
   */
  retain(keep: readonly string[]): Promise<number>;
  /**
   * Drops the counts of a namespace deleted just now (`at`, default now), so that its stat reads zeros at once, not
   * after the next pass — and stays so: what a pass due before `at` counted is not written over it (the pass read the
   * namespace before the delete and writes after it answered; its counts came back for a period). The mark goes at the
   * first pass that no longer lists the namespace.
   */
  forget(namespace: string, at?: number): Promise<void>;
  /** The namespace's counts, or undefined when no pass has counted it yet. */
  read(namespace: string): Promise<NamespaceStat | undefined>;
  /** Epoch ms at which the last pass started, by whichever worker. */
  lastPassAt(): Promise<number | undefined>;
  setLastPassAt(at: number): Promise<void>;
  /** Nothing of its own to release on Redis (the process's client); for `ModuleContext.shared`. */
  close(): Promise<void>;
}

export const EMPTY_STAT: NamespaceStat = { namespaces: 0, services: { total: 0, health: 0 }, instances: 0, configs: 0 };

export function createMemoryStatsStore(): StatsStore {
  const stats = new Map<string, NamespaceStat>();
  const passes = new Map<string, number>();
  let last: number | undefined;
  return {
    kind: "embedded",
    async write(ns, stat, passAt, now = Infinity) {
      const stored = passes.get(ns) ?? -Infinity;
      if (passAt !== undefined && stored > passAt && stored <= now + CLOCK_SKEW_ALLOWANCE_MS) return;
      stats.set(ns, stat);
      if (passAt !== undefined) passes.set(ns, passAt);
      else passes.delete(ns);
    },
    read: async (ns) => stats.get(ns),
    async retain(keep) {
      const kept = new Set(keep);
      let n = 0;
      for (const ns of new Set([...stats.keys(), ...passes.keys()])) {
        if (kept.has(ns)) continue;
        stats.delete(ns);
        passes.delete(ns);
        n++;
      }
      return n;
    },
    async forget(ns, at = Date.now()) {
      stats.delete(ns);
      passes.set(ns, at);
    },
    lastPassAt: async () => last,
    async setLastPassAt(at) {
      last = at;
    },
    close: async () => stats.clear(),
  };
}

const FIELDS = ["namespaces", "services", "health", "instances", "configs"] as const;

/**
 * KEYS: the namespace's stat hash. ARGV: passAt ('' = always), then the FIELDS' values, then the writer's clock plus the
 * allowance ('' = none) → 1 written | 0 older than the stored pass (its `passAt` field), unless that one is later than
 * the writer's clock.
 */
const WRITE = defineScript(
  "gov-stats-write",
  1,
  `
if ARGV[1] ~= '' then
  local stored = tonumber(redis.call('HGET', KEYS[1], 'passAt'))
  local future = ARGV[7] ~= '' and stored and stored > tonumber(ARGV[7])
  if stored and stored > tonumber(ARGV[1]) and not future then return 0 end
  redis.call('HSET', KEYS[1], 'passAt', ARGV[1])
else
  redis.call('HDEL', KEYS[1], 'passAt')
end
redis.call('HSET', KEYS[1], 'namespaces', ARGV[2], 'services', ARGV[3], 'health', ARGV[4], 'instances', ARGV[5], 'configs', ARGV[6])
return 1
`,
);

/** KEYS: the namespace's stat hash. ARGV: the time of the delete → its counts gone, that time kept as its `passAt`. */
const FORGET = defineScript(
  "gov-stats-forget",
  1,
  `
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'passAt', ARGV[1])
return 1
`,
);

/**
 * On Redis: a hash `{ns}:stat` per namespace (in the namespace's slot, beside its data); in the system namespace, the
 * set of namespaces that have one (`{system}:stat_idx`) and a string `{system}:stat_last_pass`.
 */
export function createRedisStatsStore(client: RedisClient, systemNamespace: string, kind = "redis"): StatsStore {
  const call = redisCaller(client);
  const key = (ns: string) => `${ns}:stat`;
  const lastKey = `${systemNamespace}:stat_last_pass`;
  const indexKey = `${systemNamespace}:stat_idx`;
  prepareScripts(client, WRITE, FORGET);
  return {
    kind,
    async write(ns, s, passAt, now) {
      // two slots (the namespace's, the system's): two commands, sent together
      await call(() =>
        Promise.all([
          runScript(client, WRITE, [key(ns)], [passAt ?? "", s.namespaces, s.services.total, s.services.health, s.instances, s.configs, now === undefined ? "" : now + CLOCK_SKEW_ALLOWANCE_MS]),
          client.sadd(indexKey, ns),
        ]),
      );
    },
    async retain(keep) {
      const kept = new Set(keep);
      const gone = (await call(() => client.smembers(indexKey))).filter((ns) => !kept.has(ns));
      // each stat key lives in its own namespace's slot: one DEL per key, pipelined
      await call(() => Promise.all([...gone.map((ns) => client.del(key(ns))), ...(gone.length ? [client.srem(indexKey, ...gone)] : [])]));
      return gone.length;
    },
    async forget(ns, at = Date.now()) {
      // (indexed, so that the next pass that no longer lists the namespace deletes the mark)
      await call(() => Promise.all([runScript(client, FORGET, [key(ns)], [at]), client.sadd(indexKey, ns)]));
    },
    async read(ns) {
      const values = await call(() => client.hmget(key(ns), ...FIELDS));
      if (values.every((v) => v === null)) return undefined;
      const [namespaces, total, health, instances, configs] = values.map((v) => Number(v ?? 0));
      return { namespaces, services: { total, health }, instances, configs };
    },
    async lastPassAt() {
      const v = await call(() => client.get(lastKey));
      return v === null ? undefined : Number(v);
    },
    async setLastPassAt(at) {
      await call(() => client.set(lastKey, String(at)));
    },
    close: async () => {},
  };
}
