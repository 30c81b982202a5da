import type { EventEmitter } from "node:events";
import { Cluster, type Redis } from "ioredis";
import type { RedisClient } from "@gov/redis";
import { createConfigReadCache, type CachedRead, type ConfigReadCacheOptions } from "./config-read-cache.js";
import { StoreUnavailableError, type ConfigChange, type ConfigOp, type ConfigStore, type ConfigStoreOptions } from "./config-store.js";
import { EVENT_PATTERN, configKeys, defineConfigScripts, eventChannel, parseChangeEvent } from "./redis-config-scripts.js";

export interface RedisConfigStoreOptions extends ConfigStoreOptions, ConfigReadCacheOptions {
  /** "redis" or "redis-cluster"; detected from the client when omitted. */
  kind?: string;
  /** How long creation waits for the change subscription (default 5000 ms); until it is live, reads are not cached. */
  subscribeTimeoutMs?: number;
}

/**
 * The config store on Redis (standalone or Cluster). It OWNS `client`: `close()` quits it, together with the
 * second connection it opens with `client.duplicate()` for the change subscription.
 *
 * Reads of one config are served from an in-process cache while the subscription is live; change events
 * (published by the write scripts, received by every store including the writer) invalidate it.
 */
export async function createRedisConfigStore(client: RedisClient, options: RedisConfigStoreOptions): Promise<ConfigStore> {
  defineConfigScripts(client);
  const kind = options.kind ?? (client instanceof Cluster ? "redis-cluster" : "redis");
  const cache = createConfigReadCache(options);
  const listeners = new Set<(change: ConfigChange) => void>();
  const resyncs = new Set<() => void>();
  let everLive = false;
  const cause = trackConnectionCause(client);
  let closed = false;

  /**
   * Runs one Redis call, turning connection failures into StoreUnavailableError. Time bounds come from the client's
   * own `commandTimeout` (connectRedis sets it), so a silent server fails the call too.
   */
  const call = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (err) {
      if (!isConnectionError(err)) throw err;
      throw new StoreUnavailableError(`Redis at ${addressOf(client)} is unavailable (${cause() ?? plainCause(err as Error)}): retry when it is back`, { cause: err });
    }
  };

  /** A write through this store forgets its key at once (read-your-writes), not only when the event arrives. */
  const write = async <T>(ns: string, id: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await call(run);
    } finally {
      cache.invalidate(cache.keyOf(ns, id));
    }
  };

  const onMessage = (channel: string, message: string) => {
    const change = parseChangeEvent(channel, message);
    if (!change) return;
    cache.invalidate(cache.keyOf(change.namespace, change.configId));
    for (const l of listeners) queueMicrotask(() => l(change));
  };

  const sub: RedisClient = client instanceof Cluster ? client.duplicate() : client.duplicate();
  const subscription = keepSubscribed(sub, {
    message: onMessage,
    // Events may have been missed while the subscription was down: start from an empty cache either way.
    live: () => {
      cache.clear(true);
      // Back after a loss: tell followers (watches) to re-read, since Pub/Sub does not replay what was missed —
      // once the command connection is back too, or their re-read would fail.
      if (everLive) {
        const announce = () => resyncs.forEach((r) => queueMicrotask(r));
        if (client.status === "ready") announce();
        else (client as EventEmitter).once("ready", announce);
      }
      everLive = true;
    },
    lost: () => cache.clear(false),
  });
  await Promise.race([subscription.firstLive, sleep(options.subscribeTimeoutMs ?? 5000)]);

  return {
    kind,
    async list(ns) {
      const [idx] = configKeys(ns, "");
      return (await call(() => client.smembers(idx))).sort();
    },
    async get(ns, id) {
      const key = cache.keyOf(ns, id);
      const hit = cache.lookup(key);
      if (hit !== undefined) return hit ?? undefined;
      const ticket = cache.begin(key);
      let value: CachedRead | undefined;
      try {
        const fields = await call(() => client.hgetall(configKeys(ns, id)[1]));
        value = fields.version === undefined ? null : toRecord(fields);
        return value ?? undefined;
      } finally {
        cache.end(ticket, value);
      }
    },
    async set(ns, id, data, hash, now) {
      const args = [id, data, hash, now, options.maxVersions, eventChannel(ns)] as const;
      const [changed, version] = await write(ns, id, () => client.govConfigSet(...configKeys(ns, id), ...args));
      return { changed: changed === 1, version };
    },
    async remove(ns, id, now) {
      const args = [id, now, options.maxVersions, eventChannel(ns)] as const;
      return (await write(ns, id, () => client.govConfigRemove(...configKeys(ns, id), ...args))) === 1;
    },
    async rollback(ns, id, target, now) {
      const args = [id, target, now, options.maxVersions, eventChannel(ns)] as const;
      const result = await write(ns, id, () => client.govConfigRollback(...configKeys(ns, id), ...args));
      return result ? { changed: result[0] === 1, version: result[1] } : undefined;
    },
    async versions(ns, id) {
      const members = await call(() => client.zrevrange(configKeys(ns, id)[3], 0, -1));
      return members.map((m) => {
        const [version, op, opTime] = m.split(":");
        return { configId: id, version: Number(version), op: op as ConfigOp, opTime: Number(opTime) };
      });
    },
    async version(ns, id, v) {
      const json = await call(() => client.hget(configKeys(ns, id)[2], String(v)));
      if (json === null) return undefined;
      const r = JSON.parse(json) as Record<string, string>;
      return { ...toRecord(r), op: r.op as ConfigOp, opTime: Number(r.opTime) };
    },
    subscribe(listener, onResync) {
      listeners.add(listener);
      if (onResync) resyncs.add(onResync);
      return () => {
        listeners.delete(listener);
        if (onResync) resyncs.delete(onResync);
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      subscription.stop();
      listeners.clear();
      resyncs.clear();
      cache.clear(false);
      await Promise.all([quitQuietly(sub), quitQuietly(client)]);
    },
  };
}

const toRecord = (f: Record<string, string>) => ({
  configId: f.configId,
  data: f.data,
  hash: f.hash,
  version: Number(f.version),
  createTime: Number(f.createTime),
});

/**
 * Keeps one PSUBSCRIBE alive on `sub`: calls `live` once the server confirmed it, `lost` as soon as the
 * connection carrying it closes, then subscribes again until it succeeds or `stop` is called.
 */
function keepSubscribed(sub: RedisClient, on: { message(channel: string, message: string): void; live(): void; lost(): void }) {
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  let markFirstLive: () => void = () => {};
  const firstLive = new Promise<void>((resolve) => (markFirstLive = resolve));
  const events = sub as EventEmitter; // Redis and Cluster overload on() differently
  events.on("pmessage", (_pattern: string, channel: string, message: string) => on.message(channel, message));
  events.on("error", () => {}); // reported through lost/live; avoids ioredis' "unhandled error event" noise

  let live = false;
  let busy = false;
  let again = false;
  const attempt = async (): Promise<void> => {
    clearTimeout(retry);
    if (stopped || live) return;
    if (busy) return void (again = true); // e.g. "ready" arrived while a failing attempt is in flight
    busy = true;
    again = false;
    try {
      await sub.psubscribe(EVENT_PATTERN);
      const conn = subscriberConnectionOf(sub);
      if (stopped || conn.status !== "ready") throw new Error("subscriber connection is not ready");
      (conn as EventEmitter).once("close", onClose);
      live = true;
      on.live();
      markFirstLive();
    } catch {
      if (!stopped) retry = setTimeout(attempt, 200);
    } finally {
      busy = false;
    }
    if (again) void attempt();
  };
  const onClose = () => {
    if (stopped) return;
    live = false;
    on.lost();
    void attempt();
  };
  events.on("ready", () => void attempt()); // a reconnected standalone client: subscribe again at once
  void attempt();
  return {
    firstLive,
    stop() {
      stopped = true;
      clearTimeout(retry);
    },
  };
}

/**
 * The connection that carries the subscription. A Cluster client subscribes through one node connection that
 * ioredis keeps private and silently replaces when that node goes away (messages published meanwhile are
 * lost), so we watch that connection itself; the Cluster's own events are the fallback.
 */
function subscriberConnectionOf(sub: RedisClient): Redis | RedisClient {
  if (!(sub instanceof Cluster)) return sub;
  const internal = (sub as unknown as { subscriber?: { getInstance?: () => Redis | null } }).subscriber;
  return internal?.getInstance?.() ?? sub;
}

const CONNECTION_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "ECONNABORTED"]);
const CONNECTION_MESSAGES =
  /Connection is closed|Stream isn't writeable|isn't ready and enableOfflineQueue|None of startup nodes|Failed to refresh slots cache|max retries per request|Command timed out|^(CLUSTERDOWN|LOADING|MASTERDOWN|TRYAGAIN)\b/i;

/** Errors that mean "Redis cannot be reached right now"; script and logic errors are not among them. */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && CONNECTION_CODES.has(code)) return true;
  return err.name === "MaxRetriesPerRequestError" || err.name === "ClusterAllFailedError" || CONNECTION_MESSAGES.test(err.message);
}

/** The last connection error the client reported (e.g. "connect ECONNREFUSED 127.0.0.1:6390"), until it is ready again. */
function trackConnectionCause(client: RedisClient): () => string | undefined {
  let last: string | undefined;
  const note = (err: Error) => {
    const inner = (err as { lastNodeError?: Error }).lastNodeError ?? err;
    if (isConnectionError(inner)) last = inner.message;
  };
  client.on("error", note);
  client.on("node error", note);
  client.on("ready", () => (last = undefined));
  return () => last;
}

/** ioredis' wording for "the connection is down" means little to an operator. */
const plainCause = (err: Error) =>
  /Stream isn't writeable|isn't ready and enableOfflineQueue|Connection is closed/.test(err.message) ? "not connected" : err.message;

const addressOf = (client: RedisClient) =>
  client instanceof Cluster ? "the Redis Cluster" : `${client.options.host ?? "localhost"}:${client.options.port ?? 6379}`;

async function quitQuietly(c: RedisClient): Promise<void> {
  if (c.status === "ready") await Promise.race([c.quit().catch(() => {}), sleep(1000)]);
  c.disconnect();
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());
