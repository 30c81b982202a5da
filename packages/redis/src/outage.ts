import { Cluster } from "ioredis";
import type { RedisClient } from "./connect.js";
import { closeDurableWriter } from "./durable-write.js";
import { RETRY_WHEN_BACK, StoreUnavailableError } from "./store-errors.js";

const CONNECTION_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "ECONNABORTED"]);
// "Too many Cluster redirections": ioredis gave up following MOVED / CLUSTERDOWN replies while a failover moves slots.
// A server that is up but refuses writes: full (OOM: maxmemory with noeviction), a read-only replica (READONLY), unable
// to persist (MISCONF), short of the replicas min-replicas-to-write asks for (NOREPLICAS), or busy with a long script
// (BUSY). An operator's matter, like a server that is down — not a bug to answer with `internal`.
const REFUSED_BY_SERVER = "^(OOM|READONLY|MISCONF|NOREPLICAS|BUSY)\\b";
const CONNECTION_MESSAGES = new RegExp(
  `Connection is closed|Command aborted due to connection close|Stream isn't writeable|isn't ready and enableOfflineQueue|None of startup nodes|Failed to refresh slots cache|same slots allocation group|max retries per request|Command timed out|Too many Cluster redirections|^(CLUSTERDOWN|LOADING|MASTERDOWN|TRYAGAIN|MOVED|ASK)\\b|^UNBLOCKED force unblock from blocking operation, instance state changed|${REFUSED_BY_SERVER}`,
  "i",
);
/**
 * Refusals of a command that Redis did not execute: the server's checks come before the command runs — for a script,
 * before its first write (Redis checks memory only until a script has written, and the other states cannot change
 * while it runs) — so nothing of it was applied.
 */
export const REFUSED_UNEXECUTED = new RegExp(REFUSED_BY_SERVER, "i");

/** Errors that mean "Redis cannot be reached right now"; script and logic errors are not among them. */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && CONNECTION_CODES.has(code)) return true;
  return err.name === "MaxRetriesPerRequestError" || err.name === "ClusterAllFailedError" || CONNECTION_MESSAGES.test(err.message);
}

/**
 * Runs one Redis call; a connection failure becomes a {@link StoreUnavailableError} that says what is down and why.
 * `failure` is that mapping on its own, for a wrapper that applies it in its own catch (one async step, not two).
 */
export type RedisCall = (<T>(run: () => Promise<T>) => Promise<T>) & { failure(err: unknown): unknown };

/**
 * The one way every store turns a Redis outage into `StoreUnavailableError` (→ `unavailable`, HTTP 503). Time bounds
 * come from the client's own `commandTimeout` (connectRedis sets it), so a silent server fails the call too. The
 * message names the last connection error the client reported (e.g. "connect ECONNREFUSED 127.0.0.1:6390").
 */
export function redisCaller(client: RedisClient): RedisCall {
  const cause = trackConnectionCause(client);
  const failure = (err: unknown): unknown =>
    isConnectionError(err) ? new StoreUnavailableError(`Redis at ${addressOf(client)} is unavailable (${cause() ?? plainCause(err as Error)}): ${RETRY_WHEN_BACK}`, { cause: err }) : err;
  const call = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (err) {
      throw failure(err);
    }
  };
  return Object.assign(call, { failure });
}

/**
 * The last connection error the client reported, while it is recent: until the client is ready again, and at most
 * CAUSE_KEPT_MS. A Cluster client is "ready" once, not after each node comes back, so without the age limit an outage
 * minutes later was blamed on a node that had long been back (operators were sent to the wrong node).
 */
function trackConnectionCause(client: RedisClient): () => string | undefined {
  let last: { message: string; at: number } | undefined;
  const note = (err: Error) => {
    const inner = (err as { lastNodeError?: Error }).lastNodeError ?? err;
    if (isConnectionError(inner)) last = { message: inner.message, at: Date.now() };
  };
  client.on("error", note);
  client.on("node error", note);
  client.on("ready", () => (last = undefined));
  return () => (last && Date.now() - last.at <= CAUSE_KEPT_MS ? last.message : undefined);
}

/** How long a connection error is quoted as the cause of the failures after it (ioredis reports one per reconnect). */
const CAUSE_KEPT_MS = 10_000;

/** ioredis' wording for "the connection is down" means little to an operator. */
// A refusal inside a script ends with where in the script it came (". script: <sha>, on @user_script:57."): ours, not theirs.
const plainCause = (err: Error) =>
  /Stream isn't writeable|isn't ready and enableOfflineQueue|Connection is closed/.test(err.message) ? "not connected" : err.message.replace(/\. script: [\s\S]*$/, "");

const addressOf = (client: RedisClient) =>
  client instanceof Cluster ? "the Redis Cluster" : `${client.options.host ?? "localhost"}:${client.options.port ?? 6379}`;

/** `command`'s answer, or a rejection saying there was none within `timeoutMs`. */
async function within<T>(command: Promise<T>, what: string, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([command, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer to ${what} within ${timeoutMs} ms`)), timeoutMs)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Why Redis cannot serve right now, or undefined when it answers within `timeoutMs`: for readiness probes, which must
 * see a stopped server (client reconnecting) and a silent one (PING times out) alike. A Cluster serves only when every
 * master answers and the cluster says it covers every slot: a PING to one node (any node answers PONG, also in
 * CLUSTERDOWN) let a process whose data sat on a frozen shard read ready four probes in five.
 */
export async function redisDownReason(client: RedisClient, timeoutMs = 1000): Promise<string | undefined> {
  if (client.status !== "ready") return `not connected (${client.status})`;
  try {
    if (!(client instanceof Cluster)) {
      await within(client.ping(), "PING", timeoutMs);
      return undefined;
    }
    const masters = client.nodes("master");
    if (masters.length === 0) return "no master node known";
    const silent = await Promise.all(
      masters.map((node) => within(node.ping(), "PING", timeoutMs).then(() => undefined, (err: Error) => `${node.options.host}:${node.options.port}: ${err.message}`)),
    );
    const down = silent.filter((reason) => reason !== undefined);
    if (down.length > 0) return `master ${down.join("; master ")}`;
    const info = String(await within(masters[0].call("CLUSTER", "INFO"), "CLUSTER INFO", timeoutMs));
    const state = /cluster_state:(\w+)/.exec(info)?.[1];
    return state === "ok" ? undefined : `the cluster is down (cluster_state:${state ?? "unknown"}: some hash slots have no master that answers)`;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * Closes a client without hanging on a dead server or throwing: QUIT when connected (bounded to 1 s), then drop the
 * socket, which also stops reconnecting. Its durable writes' connection (see requireReplicas) closes first.
 */
export async function quitQuietly(client: RedisClient): Promise<void> {
  await closeDurableWriter(client);
  if (client.status === "ready") await Promise.race([client.quit().catch(() => {}), sleep(1000)]);
  client.disconnect();
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());
