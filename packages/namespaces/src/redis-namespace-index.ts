import { Cluster } from "ioredis";
import { defineScript, followChanges, prepareScripts, quitQuietly, redisCaller, redisWriteCaller, runDurableScript, writeDurably, type RedisClient, type SubscriberHub } from "@gov/redis";
import { SystemNamespaceError, type NamespaceIndex } from "./namespace-index.js";

/** What `add` answers for a namespace already known to be indexed. */
const DONE: Promise<void> = Promise.resolve();

export interface RedisNamespaceIndexOptions {
  /** The system namespace (`gov.namespace.system`); every key of the index is in it (one Cluster slot). */
  system: string;
  /** "redis" or "redis-cluster"; detected from the client when omitted. */
  kind?: string;
  /** The process's Pub/Sub hub; with it the index neither opens a subscriber connection nor quits `client` on close. */
  hub?: SubscriberHub;
  /** How long creation waits for the removal subscription (default 5000 ms); until it is live, nothing is cached. */
  subscribeTimeoutMs?: number;
  /** Most namespaces remembered as indexed (default 10,000): past it the cache starts over, so it stays bounded. */
  maxCached?: number;
}

/** The keys of the index: all in the system namespace, so one script or MULTI may use both on a Cluster. */
export function indexKeys(system: string) {
  return {
    index: `${system}:ns_idx`, // set of namespace names
    current: `${system}:ns_current`, // string: the current context namespace (absent = the system namespace)
    channel: `${system}:ns_evt`, // Pub/Sub: the name of each removed namespace
  };
}

/** KEYS: index, current. ARGV: namespace, system, channel → 1 removed | 0 not indexed. Current falls back to system. */
const REMOVE = defineScript(
  "gov-namespace-remove",
  2,
  `
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
`,
);

/** A channel name as a PSUBSCRIBE pattern matching only itself. */
const exactPattern = (channel: string) => channel.replace(/[*?[\]\\]/g, "\\$&");

/**
 * The namespace index on Redis (standalone or Cluster). `add` is served from a per-process cache of namespaces known to
 * be indexed while the removal feed is live: every removal (from any process) is published and evicts its name, and a
 * lost feed empties the cache until it is back. Without `options.hub` the index OWNS `client` and quits it on close.
 */
export async function createRedisNamespaceIndex(client: RedisClient, options: RedisNamespaceIndexOptions): Promise<NamespaceIndex> {
  const { system } = options;
  const keys = indexKeys(system);
  const kind = options.kind ?? (client instanceof Cluster ? "redis-cluster" : "redis");
  const call = redisCaller(client);
  prepareScripts(client, REMOVE);
  const maxCached = options.maxCached ?? 10_000;
  const known = new Set<string>();
  let live = false;
  /** Bumped by every removal heard: an add that straddles one does not cache its name (it may be the removed one). */
  let removals = 0;
  let closed = false;

  const forget = (ns: string) => {
    removals++;
    known.delete(ns);
  };
  const feed = await followChanges<string>(client, {
    hub: options.hub,
    pattern: exactPattern(keys.channel),
    parse: (channel, message) => (channel === keys.channel ? message : undefined),
    onChange: forget,
    onLive: () => {
      known.clear();
      live = true;
    },
    onLost: () => {
      live = false;
      removals++;
      known.clear();
    },
    subscribeTimeoutMs: options.subscribeTimeoutMs,
  });

  const remember = (ns: string, seen: number) => {
    if (!live || seen !== removals) return;
    if (known.size >= maxCached) known.clear();
    known.add(ns);
  };

  /**
   * A write of the index: a connection failure says whether it may have been applied ("outcome unknown") or surely was
   * not ("nothing was written"), as every other store write does — a register's first write is the index's.
   */
  const written = redisWriteCaller(client, call, (what: string) => ({
    what,
    howToCheck: "list the namespaces (GET /v1/namespaces, or ListNamespaces) before retrying; sending the same call again is safe",
  }));

  const addUnknown = async (ns: string): Promise<void> => {
    const seen = removals;
    // Durable (gov.redis.min-replicas): a namespace created with a config must survive a failover as the config does.
    await written(`the indexing of namespace ${JSON.stringify(ns)}`, () => writeDurably(client, keys.index, (batch) => batch.sadd(keys.index, ns)));
    remember(ns, seen);
  };

  // Created at startup (contract §2): listing never misses the system namespace.
  await call(() => client.sadd(keys.index, system));

  return {
    kind,
    system,
    add(ns) {
      // Known (every write to an indexed namespace): no async function's frame and promise, one shared promise.
      return known.has(ns) ? DONE : addUnknown(ns);
    },
    async create(ns) {
      const seen = removals;
      const added = await written(`the creation of namespace ${JSON.stringify(ns)}`, () => writeDurably<number>(client, keys.index, (batch) => batch.sadd(keys.index, ns)));
      remember(ns, seen);
      return added === 1;
    },
    async has(ns) {
      return (await call(() => client.sismember(keys.index, ns))) === 1;
    },
    // The system namespace is listed and counted even if the index was lost (a Redis restarted without persistence).
    async list() {
      const names = await call(() => client.smembers(keys.index));
      return (names.includes(system) ? names : [...names, system]).sort();
    },
    async count() {
      const replies = await call(() => client.multi().scard(keys.index).sismember(keys.index, system).exec());
      const [[e1, n], [e2, hasSystem]] = replies as [Error | null, number][];
      if (e1 || e2) throw e1 ?? e2;
      return n + (hasSystem ? 0 : 1);
    },
    async remove(ns) {
      if (ns === system) throw new SystemNamespaceError(system);
      forget(ns);
      return (await written(`the removal of namespace ${JSON.stringify(ns)}`, () => runDurableScript(client, REMOVE, [keys.index, keys.current], [ns, system, keys.channel]))) === 1;
    },
    async current() {
      return (await call(() => client.get(keys.current))) ?? system;
    },
    async setCurrent(ns) {
      const replies = await written(`setting the current namespace to ${JSON.stringify(ns)}`, () => client.multi().sadd(keys.index, ns).set(keys.current, ns).exec());
      const failed = replies?.find(([err]) => err);
      if (!replies || failed) throw failed?.[0] ?? new Error("setting the current namespace was aborted");
    },
    async close() {
      if (closed) return;
      closed = true;
      known.clear();
      await feed.close();
      if (!options.hub) await quitQuietly(client);
    },
  };
}
