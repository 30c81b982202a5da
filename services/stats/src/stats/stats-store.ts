import { redisCaller, type RedisClient } from "@gov/redis";

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
  /** Replaces the namespace's counts. */
  write(namespace: string, stat: NamespaceStat): Promise<void>;
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
  let last: number | undefined;
  return {
    kind: "embedded",
    async write(ns, stat) {
      stats.set(ns, stat);
    },
    read: async (ns) => stats.get(ns),
    lastPassAt: async () => last,
    async setLastPassAt(at) {
      last = at;
    },
    close: async () => stats.clear(),
  };
}

const FIELDS = ["namespaces", "services", "health", "instances", "configs"] as const;

/**
 * On Redis: a hash `{ns}:stat` per namespace (in the namespace's slot, beside its data) and a string
 * `{system}:stat_last_pass` in the system namespace.
 */
export function createRedisStatsStore(client: RedisClient, systemNamespace: string, kind = "redis"): StatsStore {
  const call = redisCaller(client);
  const key = (ns: string) => `${ns}:stat`;
  const lastKey = `${systemNamespace}:stat_last_pass`;
  return {
    kind,
    async write(ns, s) {
      await call(() => client.hset(key(ns), { namespaces: s.namespaces, services: s.services.total, health: s.services.health, instances: s.instances, configs: s.configs }));
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
