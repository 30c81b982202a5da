import { Cluster } from "ioredis";
import { Code, ConnectError } from "@connectrpc/connect";
import { followChanges, quitQuietly, redisCaller, redisWriteCaller, type RedisClient, type SubscriberHub } from "@gov/redis";
import { mapInTurns, sortInTurns } from "@gov/service-kit";
import { createConfigReadCache, type CachedRead, type ConfigReadCacheOptions } from "./config-read-cache.js";
import { type ConfigChange, type ConfigOp, type ConfigRecord, type ConfigStore, type ConfigStoreOptions } from "./config-store.js";
import { DELETE_CHUNK, EVENT_PATTERN, configDataKeys, configKeys, configScripts, eventChannel, parseChangeEvent, parseHistoryEntry } from "./redis-config-scripts.js";
import { failedConfigWrite } from "./redis-write-outcome.js";

export interface RedisConfigStoreOptions extends ConfigStoreOptions, ConfigReadCacheOptions {
  /** "redis" or "redis-cluster"; detected from the client when omitted. */
  kind?: string;
  /** How long creation waits for the change subscription (default 5000 ms); until it is live, reads are not cached. */
  subscribeTimeoutMs?: number;
  /**
   * The process's shared Pub/Sub connection (see `@gov/redis` createSubscriberHub). When given, the store neither
   * opens a subscriber connection of its own nor quits `client` on close: both belong to the process.
   */
  hub?: SubscriberHub;
}

/**
 * The config store on Redis (standalone or Cluster). Without `options.hub` it OWNS `client`: `close()` quits it,
 * together with the second connection it opens with `client.duplicate()` for the change subscription.
 *
 * Reads of one config are served from an in-process cache while the subscription is live; change events
 * (published by the write scripts, received by every store including the writer) invalidate it. With nothing cached
 * and no watch the subscription pauses (see `idle` below), so a process that only writes is sent no events.
 */
export async function createRedisConfigStore(client: RedisClient, options: RedisConfigStoreOptions): Promise<ConfigStore> {
  const scripts = configScripts(client);
  const kind = options.kind ?? (client instanceof Cluster ? "redis-cluster" : "redis");
  const cache = createConfigReadCache(options);
  /**
   * Reads of a config under way, joined by whoever asks for it meanwhile: a change's watchers all read it at once, and
   * sharing one read hands them one record, whose messages and texts are then made once (300 SSE watchers of a 1 MiB
   * config held the event loop for seconds). A write or change event for the key ends the sharing: a read begun
   * before it is not joined after it.
   */
  const reading = new Map<string, Promise<unknown>>();
  const readKey = (namespace: string, configId: string) => `${namespace}\u0000${configId}`;
  const forget = (namespace: string, configId: string) => {
    cache.invalidate(namespace, configId);
    if (reading.size === 0) return;
    const key = readKey(namespace, configId);
    // the config's read, and its history versions' (`key` + NUL + version)
    for (const k of reading.keys()) if (k === key || k.startsWith(`${key}\u0000`)) reading.delete(k);
  };
  /** `read`, or the same read already under way for `key` (see `reading`). */
  const joined = <T>(key: string, read: () => Promise<T>): Promise<T> => {
    const under = reading.get(key) as Promise<T> | undefined;
    if (under) return under;
    const started = read();
    const done = () => void (reading.get(key) === started && reading.delete(key));
    started.then(done, done);
    reading.set(key, started);
    return started;
  };
  const forgetAll = (trusted: boolean) => {
    cache.clear(trusted);
    reading.clear();
  };
  let closed = false;
  /** Connection failures become StoreUnavailableError (→ unavailable), the same way for every store. */
  const call = redisCaller(client);

  /**
   * A write through this store forgets its key at once (read-your-writes), not only when the event arrives.
   * A failed write says whether it may have been applied (see redis-write-outcome.ts).
   */
  const written = redisWriteCaller(client, call, failedConfigWrite);
  const write = async <T>(namespace: string, configId: string, op: ConfigOp, run: () => Promise<T>): Promise<T> => {
    try {
      return await written({ op, namespace, configId }, run);
    } finally {
      forget(namespace, configId);
    }
  };

  const feed = await followChanges<ConfigChange>(client, {
    hub: options.hub,
    pattern: EVENT_PATTERN,
    parse: parseChangeEvent,
    // Most events need no decoding: every write through this store echoes one back after it has already invalidated
    // its key, and with no watch here an event only matters to the cache if it holds something of that namespace.
    skip: (channel) => channel.endsWith(EVENT_SUFFIX) && !cache.concerns(channel.slice(0, -EVENT_SUFFIX.length)),
    onChange: (change) => forget(change.namespace, change.configId),
    // Nothing cached, nothing being read, no watch here (a process that only writes, or whose cache its own writes
    // emptied): the subscription pauses, and resumes at the next read that misses (`wake` in `get`).
    idle: () => cache.empty,
    // Events may have been missed while the subscription was down: start from an empty cache either way.
    onLive: () => forgetAll(true),
    onLost: () => forgetAll(false),
    subscribeTimeoutMs: options.subscribeTimeoutMs,
  });

  return {
    kind,
    async list(ns) {
      const [idx] = configKeys(ns, "");
      // Sorted a few milliseconds at a time: one sort of a 100,000-config namespace held the event loop for 30–60 ms.
      // The set is still read whole (ioredis decodes the reply in one piece, 20–45 ms for 100,000 ids): an SSCAN in
      // pieces may miss an id added or show one removed meanwhile, a listing of no state the namespace ever had.
      return sortInTurns(await call(() => client.smembers(idx)));
    },
    get(ns, id) {
      const hit = cache.lookup(ns, id);
      if (hit !== undefined) return Promise.resolve(hit ?? undefined);
      feed.wake(); // a paused feed: this read is not cached, the ones after the subscription's confirmation are
      return joined(readKey(ns, id), async () => {
        const ticket = cache.begin(ns, id);
        let value: CachedRead | undefined;
        try {
          const fields = await call(() => client.hgetall(configKeys(ns, id)[1]));
          value = fields.version === undefined ? null : toRecord(fields);
          return value ?? undefined;
        } finally {
          cache.end(ticket, value);
        }
      });
    },
    async set(ns, id, data, hash, now) {
      const keys = configKeys(ns, id);
      let version: number;
      // `write`, written out: one async step less on every PUT
      try {
        version = await written({ op: "set", namespace: ns, configId: id }, () => scripts.set(keys, [id, data, hash, now, options.maxVersions, eventChannel(ns)]));
      } finally {
        forget(ns, id);
      }
      return version > 0 ? { changed: true, version } : { changed: false, version: -version };
    },
    async create(ns, id, data, hash, now) {
      const args = [id, data, hash, now, options.maxVersions, eventChannel(ns), "1"] as const;
      const version = await write(ns, id, "set", () => scripts.set(configKeys(ns, id), [...args]));
      return version === 0 ? undefined : { changed: true, version };
    },
    async remove(ns, id, now) {
      const args = [id, now, options.maxVersions, eventChannel(ns)] as const;
      return (await write(ns, id, "remove", () => scripts.remove(...configKeys(ns, id), ...args))) === 1;
    },
    async rollback(ns, id, target, now) {
      const args = [id, target, now, options.maxVersions, eventChannel(ns)] as const;
      const result = await write(ns, id, "rollback", () => scripts.rollback(...configKeys(ns, id), ...args));
      return result ? { changed: result[0] === 1, version: result[1] } : undefined;
    },
    async versions(ns, id) {
      const [, , , log, legacy] = configKeys(ns, id);
      // History of an earlier release stays in its sorted set until the next write migrates it. Both keys are read in
      // one MULTI (one slot, so also on Cluster): two separate reads could straddle that migration and miss it all.
      const replies = await call(() => client.multi().lrange(log, 0, -1).zrange(legacy, 0, "-1").exec());
      const [[logErr, entries], [legacyErr, legacyEntries]] = replies as [Error | null, string[]][];
      if (logErr || legacyErr) throw logErr ?? legacyErr;
      // Newest first (see parseHistoryEntry), parsed a few milliseconds at a time: at the largest retention
      // (gov.config.history.max-versions = 100,000) parsing it in one piece held the event loop for 35–90 ms.
      return mapInTurns([...entries, ...legacyEntries].reverse(), (m) => ({ configId: id, ...parseHistoryEntry(m) }));
    },
    version(ns, id, v) {
      // shared as a config's read is: the watchers of a config that fell behind all read the same versions
      return joined(`${readKey(ns, id)}\u0000${v}`, async () => {
        const json = await call(() => client.hget(configKeys(ns, id)[2], String(v)));
        if (json === null) return undefined;
        const r = JSON.parse(json) as Record<string, string>;
        return { ...toRecord(r), op: r.op as ConfigOp, opTime: Number(r.opTime) };
      });
    },
    async count(ns) {
      return call(() => client.scard(configKeys(ns, "")[0]));
    },
    async deleteNamespace(ns, options) {
      const [idx, , , , , removedKey] = configKeys(ns, "");
      const onlyIfEmpty = options?.onlyIfEmpty === true;
      // The script needs every key in KEYS (Cluster routing), so the ids are read first, then deleted in parts (a
      // namespace may hold tens of thousands), then read again until none is left. Without force each part refuses
      // once a config has a current version: "empty" holds atomically with each deletion. A namespace being written
      // to without pause is reported, not looped on.
      let removedCount = 0;
      for (let pass = 0; pass < DELETE_ATTEMPTS; pass++) {
        const replies = await call(() => client.multi().smembers(idx).smembers(removedKey).exec());
        const [[e1, ids], [e2, removed]] = replies as [Error | null, string[]][];
        if (e1 || e2) throw e1 ?? e2;
        if (onlyIfEmpty && ids.length > 0) return undefined;
        const all = [...new Set([...ids, ...removed])];
        if (all.length === 0) return removedCount;
        for (let i = 0; i < all.length; i += DELETE_CHUNK) {
          const part = all.slice(i, i + DELETE_CHUNK);
          const keys = [idx, removedKey, ...part.flatMap((id) => configDataKeys(ns, id))];
          let result: number;
          try {
            result = await written({ op: "deleteNamespace", namespace: ns }, () => scripts.deleteNamespacePart(keys, eventChannel(ns), onlyIfEmpty, part));
          } finally {
            for (const id of part) forget(ns, id);
          }
          if (result < 0) return undefined;
          removedCount += result;
        }
      }
      throw new ConnectError(`namespace "${ns}" kept changing while its configs were being deleted: stop writing to it, then retry`, Code.Aborted);
    },
    subscribe: (listener, onResync) => feed.subscribe(listener, onResync),
    async close() {
      if (closed) return;
      closed = true;
      forgetAll(false);
      await feed.close();
      if (!options.hub) await quitQuietly(client);
    },
  };
}

/** How often a namespace delete re-reads the config ids when writes keep changing them. */
const DELETE_ATTEMPTS = 10;

/** What every change event's channel ends with (after the namespace). */
const EVENT_SUFFIX = eventChannel("");

const toRecord = (f: Record<string, string>) => ({
  configId: f.configId,
  data: f.data,
  hash: f.hash,
  version: Number(f.version),
  createTime: Number(f.createTime),
});

