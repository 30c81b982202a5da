import { randomUUID } from "node:crypto";
import { Cluster } from "ioredis";
import { followChanges, quitQuietly, redisCaller, redisWriteCaller, WriteOutcomeUnknownError, type RedisClient, type SubscriberHub } from "@gov/redis";
import { excerpt, mapInTurns, sortInTurns } from "@gov/service-kit";
import type { InstanceRecord, RegistryChange, RegistryStore } from "./registry-store.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { DELETE_CHUNK, EVENT_PATTERN, eventChannel, namespaceKeys, parseRegistryEvent, registryScripts, serviceKeys, snapshotKeys } from "./redis-registry-scripts.js";
import { cacheRegistryReads, createRegistryReadCache, type RegistryReadCacheOptions } from "./registry-read-cache.js";

export interface RedisRegistryStoreOptions {
  /** "redis" or "redis-cluster"; detected from the client when omitted. */
  kind?: string;
  /** How long creation waits for the change subscription (default 5000 ms). */
  subscribeTimeoutMs?: number;
  /**
   * The process's shared Pub/Sub connection (see `@gov/redis` createSubscriberHub). When given, the store neither
   * opens a subscriber connection of its own nor quits `client` on close: both belong to the process.
   */
  hub?: SubscriberHub;
  /**
   * The in-process cache of instance lists kept current by the change events (see registry-read-cache.ts), with its
   * bounds; false reads Redis every time. Until the event subscription is live, nothing is cached.
   */
  readCache?: RegistryReadCacheOptions | false;
}

/** The record as stored in the service's `itc` hash: ttlMs first, where the renew script reads it. */
const recordJson = (r: InstanceRecord) =>
  JSON.stringify({ ttlMs: r.ttlMs, instanceId: r.instanceId, serviceId: r.serviceId, schema: r.schema, host: r.host, port: r.port, weight: r.weight, isEphemeral: r.isEphemeral });

type StoredRecord = Omit<InstanceRecord, "metadata" | "ttlAt">;

/** The live record from its three parts, or undefined when it is missing or expired at `now`. */
function toRecord(json: string | null | undefined, metadata: string | null | undefined, score: string | null | undefined, now: number): InstanceRecord | undefined {
  if (!json) return undefined;
  const r = JSON.parse(json) as StoredRecord;
  let ttlAt: number | undefined;
  if (r.isEphemeral) {
    if (score === null || score === undefined) return undefined; // expired and half cleaned: not live
    ttlAt = Number(score);
    if (ttlAt <= now) return undefined;
  }
  return { ...r, ...(ttlAt === undefined ? {} : { ttlAt }), metadata: metadata ? (JSON.parse(metadata) as Record<string, string>) : {} };
}

/** A registry write, for the message a caller gets when its outcome is unknown. */
type WriteTarget =
  | { op: "deleteNamespace"; namespace: string }
  | { op: "putService" | "deleteService"; namespace: string; serviceId: string }
  | { op: "register" | "deregister" | "renew" | "setMetadata"; namespace: string; serviceId: string; instanceId: string };

/** The noun of each write that names one service or instance (a namespace delete has its own words). */
const WRITE_NOUNS: Record<Exclude<WriteTarget["op"], "deleteNamespace">, string> = {
  putService: "creation",
  deleteService: "deletion",
  register: "registration",
  deregister: "deregistration",
  renew: "renewal",
  setMetadata: "metadata change",
};

/** What the write was and how to learn whether it was applied; every registry write may safely be repeated. */
function failedWrite(t: WriteTarget): { what: string; howToCheck: string } {
  const services = `/v1/namespaces/${encodeURIComponent(t.namespace)}/services`;
  if (t.op === "deleteNamespace") {
    return {
      what: `the deletion of the services of namespace "${t.namespace}"`,
      howToCheck: `list its services (GET ${services}, or ListServices): [] means they are gone; deleting again is safe`,
    };
  }
  if (!("instanceId" in t)) {
    return {
      what: `the ${WRITE_NOUNS[t.op]} of service "${t.serviceId}" in namespace "${t.namespace}"`,
      howToCheck: `list the services (GET ${services}, or ListServices) to see whether "${t.serviceId}" is there; repeating the ${t.op === "putService" ? "PUT is safe (it answers false when the service exists)" : "DELETE is safe (not_found then means it was removed)"}`,
    };
  }
  const id = t.instanceId;
  const list = `list the instances (GET ${services}/${encodeURIComponent(t.serviceId)}/instances, or ListInstances)`;
  const check: Record<typeof t.op, string> = {
    register: `${list} and look for "${id}"; registering again is safe: it replaces the record with the same one`,
    renew: `${list}: its ttlAt shows whether it was renewed; renewing again is safe (not_found means it expired: register again)`,
    deregister: `${list}: if "${id}" is not listed it is gone; deregistering again is safe (not_found then means it was removed)`,
    setMetadata: `${list} and compare the metadata of "${id}"; sending the same metadata again is safe`,
  };
  return { what: `the ${WRITE_NOUNS[t.op]} of instance "${id}" in namespace "${t.namespace}"`, howToCheck: check[t.op] };
}

/** How often a namespace delete re-reads the service ids when writes keep changing them. */
const DELETE_ATTEMPTS = 10;
/** What every event channel ends with (after the namespace). */
const EVENT_SUFFIX = eventChannel("");

/**
 * Services of up to this many instances are listed from one reply, as they always were: decoding and parsing it takes
 * a few milliseconds. A larger one is read from a snapshot in pieces (see LIST_INSTANCES_LUA).
 */
const WHOLE_LIST_MAX = 2_000;
/** Instances per piece of a snapshot's read: one piece's reply decoded and parsed is ~2–4 ms. */
const LIST_PIECE = 1_000;
/** How long a snapshot outlives a reader that never dropped it (a process gone mid-read). */
const SNAPSHOT_TTL_MS = 60_000;

/** UTF-16 code-unit order, as `<` compares strings: the order listInstances answers in. */
const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** `[id, value, id, value, …]` (HGETALL, ZRANGE WITHSCORES as a script answers them) as a map. */
function pairsToMap(pairs: string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i < pairs.length; i += 2) map.set(pairs[i], pairs[i + 1]);
  return map;
}

/**
 * The registry store on Redis (standalone or Cluster). Without `options.hub` it OWNS `client`: `close()` quits it,
 * together with the connection it opens with `client.duplicate()` for the change subscription.
 */
export async function createRedisRegistryStore(client: RedisClient, options: RedisRegistryStoreOptions = {}): Promise<RegistryStore> {
  const scripts = registryScripts(client);
  const kind = options.kind ?? (client instanceof Cluster ? "redis-cluster" : "redis");
  let closed = false;
  /** Connection failures become StoreUnavailableError (→ unavailable), the same way for every store. */
  const call = redisCaller(client);

  const cache = options.readCache === false ? undefined : createRegistryReadCache(options.readCache);
  const feed = await followChanges<RegistryChange>(client, {
    hub: options.hub,
    pattern: EVENT_PATTERN,
    parse: parseRegistryEvent,
    // With no watch here, an event matters only to the cache, and only if it holds something of that namespace.
    skip: (channel) => cache === undefined || !cache.concerns(channel.slice(0, -EVENT_SUFFIX.length)),
    onChange: (change) => cache?.apply(change),
    // Events may have been missed while the subscription was down: start from an empty cache either way.
    onLive: () => cache?.clear(true),
    onLost: () => cache?.clear(false),
    subscribeTimeoutMs: options.subscribeTimeoutMs,
  });

  /** One MULTI over keys of one slot (so also on a Cluster); any failed reply fails the read. */
  const multi = async (build: (m: ReturnType<RedisClient["multi"]>) => unknown): Promise<unknown[]> => {
    const m = client.multi();
    build(m);
    const replies = (await call(() => m.exec())) as [Error | null, unknown][] | null;
    if (!replies) throw new Error("the read transaction was aborted");
    return replies.map(([err, value]) => {
      if (err) throw err;
      return value;
    });
  };

  /**
   * One write script: a connection failure answers "outcome unknown" (504) when the script may have reached Redis,
   * "nothing was written" (503) when it provably did not (see `@gov/redis` write-outcome.ts).
   */
  const write = redisWriteCaller(client, call, failedWrite);

  /**
   * The live instances of a whole reply (`[id, json, …]`, `[id, metadata, …]`, `[id, ttlAt, …]`), sorted by id. Parsed a
   * few milliseconds at a time: a service larger than WHOLE_LIST_MAX comes whole only when its snapshot was refused.
   */
  const liveInOrder = async (records: string[], metadata: string[], scores: string[], now: number): Promise<InstanceRecord[]> => {
    const metaById = pairsToMap(metadata);
    const ttlAt = pairsToMap(scores);
    const ids: string[] = [];
    for (let i = 0; i < records.length; i += 2) ids.push(records[i]);
    const jsonById = pairsToMap(records);
    const parsed = await mapInTurns(await sortInTurns(ids, byCodeUnits), (id) => toRecord(jsonById.get(id), metaById.get(id), ttlAt.get(id), now));
    return parsed.filter((r) => r !== undefined);
  };

  /**
   * The live instances held by a snapshot (see LIST_INSTANCES_LUA) whose instance ids are `ids`, sorted by id: read and
   * parsed LIST_PIECE at a time, in id order, one piece after the other (each reply decoded on its own, with turns of
   * the event loop between). Pieces of a snapshot are one consistent view: the copies were made at one instant and no
   * write reaches them, so no instance is skipped or read twice, whatever is written to the service meanwhile.
   */
  const readSnapshot = async ([itc, meta, ttl]: string[], ids: string[], now: number): Promise<InstanceRecord[]> => {
    await sortInTurns(ids, byCodeUnits); // 40,000 ids: 5–10 ms in one piece
    const live: InstanceRecord[] = [];
    for (let at = 0; at < ids.length; at += LIST_PIECE) {
      const piece = ids.slice(at, at + LIST_PIECE);
      const [records, metadata, scores] = (await multi((m) => m.hmget(itc, ...piece).hmget(meta, ...piece).zmscore(ttl, ...piece))) as (string | null)[][];
      for (let i = 0; i < piece.length; i++) {
        const r = toRecord(records[i], metadata[i], scores[i], now);
        if (r) live.push(r);
      }
    }
    return live;
  };

  const listServices = async (ns: string) => (await call(() => client.smembers(serviceKeys(ns, "")[0]))).sort();

  const store: RegistryStore = {
    kind,
    listServices,
    async listServiceBirths(ns) {
      const [idx, , , , , born] = serviceKeys(ns, "");
      const [ids, births] = (await multi((m) => m.smembers(idx).hgetall(born))) as [string[], Record<string, string>];
      return new Map(ids.map((serviceId) => [serviceId, Number(births[serviceId] ?? 0)]));
    },
    async putService(ns, serviceId, now = Date.now()) {
      return (await write({ op: "putService", namespace: ns, serviceId }, () => scripts.putService(serviceKeys(ns, serviceId), serviceId, eventChannel(ns), now))) === 1;
    },
    async deleteService(ns, serviceId, now) {
      const result = await write({ op: "deleteService", namespace: ns, serviceId }, () => scripts.deleteService(serviceKeys(ns, serviceId), serviceId, now, eventChannel(ns)));
      return result === 1 ? "removed" : result === 2 ? "has_instances" : "not_found";
    },
    async listInstances(ns, serviceId, now) {
      const [, itc, meta, ttl] = serviceKeys(ns, serviceId);
      const snapshot = snapshotKeys(ns, serviceId, randomUUID());
      const reply = await call(() => scripts.listInstances([itc, meta, ttl, ...snapshot], WHOLE_LIST_MAX, SNAPSHOT_TTL_MS));
      if (reply[0] === 0) return liveInOrder(reply[1], reply[2], reply[3], now);
      try {
        return await readSnapshot(snapshot, reply[1], now);
      } finally {
        // not awaited: the answer does not wait for the clean-up, which the snapshot's expiry does anyway if this fails
        client.unlink(...snapshot).catch(() => undefined);
      }
    },
    async getInstance(ns, serviceId, instanceId, now) {
      const [, itc, meta, ttl] = serviceKeys(ns, serviceId);
      const [json, metadata, score] = (await multi((m) => m.hget(itc, instanceId).hget(meta, instanceId).zscore(ttl, instanceId))) as (string | null)[];
      return toRecord(json, metadata, score, now);
    },
    async register(ns, r, now) {
      const keys = serviceKeys(ns, r.serviceId);
      await write({ op: "register", namespace: ns, serviceId: r.serviceId, instanceId: r.instanceId }, () => scripts.register(keys, r.serviceId, r.instanceId, recordJson(r), JSON.stringify(r.metadata), r.ttlAt, now, eventChannel(ns)));
    },
    async deregister(ns, serviceId, instanceId, now) {
      return (await write({ op: "deregister", namespace: ns, serviceId, instanceId }, () => scripts.deregister(serviceKeys(ns, serviceId), serviceId, instanceId, now, eventChannel(ns)))) === 1;
    },
    async renew(ns, serviceId, instanceId, now) {
      const target = { op: "renew", namespace: ns, serviceId, instanceId } as const;
      const ttlAt = await write(target, () => scripts.renew(serviceKeys(ns, serviceId), serviceId, instanceId, now, eventChannel(ns)));
      if (ttlAt === null) return undefined;
      // Seen during a Cluster failover: an answer that was not the script's ("OK"), handed over by ioredis's Cluster
      // pipelines (guarded since: @gov/redis cluster-pipelines.ts). Should another path do it, a NaN deadline would
      // reach the caller and the read cache; the renewal's outcome is unknown instead.
      if (!Number.isFinite(Number(ttlAt))) {
        const { what, howToCheck } = failedWrite(target);
        throw new WriteOutcomeUnknownError(`${what} got an answer that is not the script's (${excerpt(String(ttlAt))}), so it may or may not have been applied: ${howToCheck}`);
      }
      return ttlAt < 0 ? {} : { ttlAt: Number(ttlAt) };
    },
    async setMetadata(ns, serviceId, instanceId, metadata, now) {
      const keys = serviceKeys(ns, serviceId);
      return (await write({ op: "setMetadata", namespace: ns, serviceId, instanceId }, () => scripts.setMetadata(keys, serviceId, instanceId, JSON.stringify(metadata), now, eventChannel(ns)))) === 1;
    },
    async stats(ns, now) {
      const ids = await listServices(ns);
      if (ids.length === 0) return [];
      // Live = all records minus those whose expiry has passed (fixed instances have none): two counts per service,
      // in one MULTI (every key shares the namespace's slot).
      const counts = (await multi((m) => {
        for (const id of ids) {
          const [, itc, , ttl] = serviceKeys(ns, id);
          m.hlen(itc).zcount(ttl, "-inf", String(now));
        }
      })) as number[];
      return ids.map((serviceId, i) => ({ serviceId, instanceCount: counts[2 * i] - counts[2 * i + 1] }));
    },
    async sweep(ns, now, mayWrite) {
      // One script per service, all sent at once (pipelined: two round trips per namespace whatever its size); each
      // stays short, so a large namespace never blocks Redis for long.
      const ids = await listServices(ns);
      if (mayWrite?.() === false) return 0;
      const dropped = await call(() => Promise.all(ids.map((serviceId) => scripts.sweep(serviceKeys(ns, serviceId), serviceId, now, eventChannel(ns)))));
      return dropped.reduce((a, b) => a + b, 0);
    },
    async sweptStats(ns) {
      const [idx, , , , stat] = serviceKeys(ns, "");
      const [ids, counts] = (await multi((m) => m.smembers(idx).hgetall(stat))) as [string[], Record<string, string>];
      return ids.sort().map((serviceId) => ({ serviceId, instanceCount: Number(counts[serviceId] ?? 0) }));
    },
    async countServices(ns) {
      return call(() => client.scard(serviceKeys(ns, "")[0]));
    },
    async deleteNamespace(ns, options) {
      const onlyIfEmpty = options?.onlyIfEmpty === true;
      // Every key must be in KEYS (Cluster routing), so the service ids are read first, then deleted in parts (a
      // namespace may hold tens of thousands), then read again until none is left; without force each part refuses
      // once a service exists: "empty" holds atomically with each deletion. A namespace registered into without pause
      // is reported, not looped on.
      let services = 0;
      let instances = 0;
      for (let pass = 0; pass < DELETE_ATTEMPTS; pass++) {
        const ids = await listServices(ns);
        if (onlyIfEmpty && ids.length > 0) return undefined;
        // an empty index still takes one call: it drops the namespace's stat hash
        for (let i = 0; i === 0 || i < ids.length; i += DELETE_CHUNK) {
          const part = ids.slice(i, i + DELETE_CHUNK);
          const result = await write({ op: "deleteNamespace", namespace: ns }, () => scripts.deleteNamespacePart(namespaceKeys(ns, part), eventChannel(ns), onlyIfEmpty, part));
          if (result[0] < 0) return undefined;
          services += result[0];
          instances += result[1];
        }
        if (ids.length === 0) return { services, instances };
      }
      throw new ConnectError(`namespace "${ns}" kept changing while its services were being deleted: stop registering in it, then retry`, Code.Aborted);
    },
    subscribe: (listener, onResync) => feed.subscribe(listener, onResync),
    async close() {
      if (closed) return;
      closed = true;
      await feed.close();
      if (!options.hub) await quitQuietly(client);
    },
  };
  return cache === undefined ? store : cacheRegistryReads(store, cache);
}

