import { Cluster, Redis, type RedisOptions } from "ioredis";
import { guardClusterPipelines } from "./cluster-pipelines.js";
import { keepSlotsCurrent } from "./slot-refresh.js";
import { resendOnlyAwaited } from "./resend-awaited.js";
import { writeOncePerTurn } from "./write-per-turn.js";

/** A standalone client or a cluster client; both speak the same commands. */
export type RedisClient = Redis | Cluster;

export type RedisTarget =
  | { kind: "standalone"; url: string }
  | { kind: "cluster"; nodes: { host: string; port: number }[]; username?: string; password?: string };

/**
 * `redis://…` / `rediss://…` select one server; `redis-cluster://host:port,host:port` selects a Cluster
 * (the listed nodes are only seeds — the client discovers the rest).
 */
export function parseRedisUrl(url: string): RedisTarget {
  const trimmed = url.trim();
  if (/^rediss?:\/\//.test(trimmed)) return { kind: "standalone", url: trimmed };
  const m = /^redis-cluster:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?#]+)\/?$/.exec(trimmed);
  if (!m) {
    throw new Error(
      `REDIS_URL "${url}" is not understood: use redis://host:port for one server or ` +
        `redis-cluster://host:port,host:port for a Redis Cluster`,
    );
  }
  const nodes = m[3].split(",").map((hp) => {
    const [host, port] = hp.split(":");
    const n = Number(port ?? 6379);
    if (!host || !Number.isInteger(n) || n <= 0 || n > 65535) {
      throw new Error(`REDIS_URL node "${hp}" is not host:port`);
    }
    return { host, port: n };
  });
  return {
    kind: "cluster",
    nodes,
    username: m[1] ? decodeURIComponent(m[1]) : undefined,
    password: m[2] ? decodeURIComponent(m[2]) : undefined,
  };
}

export interface ConnectOptions {
  /** Fail commands fast while disconnected instead of queueing them (default true: callers get a 503 at once). */
  failFast?: boolean;
  /** Longest a command may wait for its reply before it fails with "Command timed out" (default 3000 ms). */
  commandTimeoutMs?: number;
  /** Extra ioredis options for each connection. */
  redis?: RedisOptions;
}

/** The URL without its password, for messages and logs. */
export function redactRedisUrl(url: string): string {
  return url.replace(/(\/\/[^:@/]*:)[^@/]*@/, "$1***@");
}

/** Creates the client; it connects in the background. See {@link connectRedis} to wait for it. */
export function createRedis(url: string, options: ConnectOptions = {}): RedisClient {
  const target = parseRedisUrl(url);
  const failFast = options.failFast ?? true;
  const base: RedisOptions = {
    // Keep reconnecting forever, but never let a command wait in an offline queue for a server that is gone.
    enableOfflineQueue: !failFast,
    maxRetriesPerRequest: failFast ? 1 : 20,
    // A server that accepts the connection but never answers must not hang callers either.
    commandTimeout: options.commandTimeoutMs ?? 3000,
    retryStrategy: (times) => Math.min(times * 100, 2000),
    // A standalone client writes each turn's commands in one socket write (writeOncePerTurn) rather than with
    // ioredis' auto-pipelining, which has only one batch in flight at a time.
    enableAutoPipelining: false,
    ...options.redis,
  };
  const credentials = { ...(target.kind === "cluster" && target.username ? { username: target.username } : {}), ...(target.kind === "cluster" && target.password ? { password: target.password } : {}) };
  if (target.kind === "cluster") guardClusterPipelines(); // see cluster-pipelines.ts: replies astray after a failover
  const client =
    target.kind === "standalone"
      ? new Redis(target.url, base)
      : new Cluster(target.nodes, {
          enableOfflineQueue: !failFast,
          // Not on a Cluster: its auto-pipelines write to a node connection directly, so a write issued just as the
          // nodes go away fails with "Connection is closed." (which may mean "sent, no answer") where the routed
          // command fails with "Cluster isn't ready" (surely unsent): callers would get "outcome unknown" for writes
          // that provably never left. Each command is still routed as it is issued; its node's connection then writes
          // the turn's commands in one write (see withOurConnections).
          enableAutoPipelining: false,
          clusterRetryStrategy: (times) => Math.min(times * 100, 2000),
          redisOptions: { ...base, enableAutoPipelining: false, ...credentials },
        });
  // Connection errors reach callers as failed commands; without a listener ioredis would also print each retry.
  client.on("error", () => {});
  return withOurConnections(client);
}

/**
 * How every connection to Redis we make writes: a turn's commands in one write without waiting for earlier replies
 * (writeOncePerTurn), and never a command whose caller has had its answer (resendOnlyAwaited). On a Cluster, on each
 * node's connection as it is made, and the slot map is kept current without errors to prompt it (keepSlotsCurrent).
 * Returns `client`.
 */
function withOurConnections<T extends RedisClient>(client: T): T {
  if (client instanceof Cluster) keepSlotsCurrent(client).on("+node", (node: Redis) => resendOnlyAwaited(writeOncePerTurn(node)));
  else resendOnlyAwaited(writeOncePerTurn(client as Redis));
  return client;
}

/** A second client to the same server(s), with the same options, connections and habits as `client`. */
export const duplicateRedis = (client: RedisClient): RedisClient => withOurConnections(client instanceof Cluster ? client.duplicate() : client.duplicate());

/** Creates the client and waits until it is ready, so that fail-fast commands do not fail at startup. */
export async function connectRedis(url: string, options: ConnectOptions & { timeoutMs?: number } = {}): Promise<RedisClient> {
  const client = createRedis(url, options);
  const timeoutMs = options.timeoutMs ?? 10_000;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`Redis at ${redactRedisUrl(url)} did not become ready within ${timeoutMs} ms: check REDIS_URL and that the server is up`)),
        timeoutMs,
      );
      client.once("ready", () => {
        clearTimeout(timer);
        resolve();
      });
    });
  } catch (err) {
    client.disconnect();
    throw err;
  }
  return client;
}
