import { Cluster } from "ioredis";
import type { RedisClient } from "./connect.js";
import { closeDurableWriter } from "./durable-write.js";
import { RETRY_WHEN_BACK, StoreUnavailableError } from "./store-errors.js";

const CONNECTION_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "ECONNABORTED"]);
// "Too many Cluster redirections": ioredis gave up following MOVED / CLUSTERDOWN replies while a failover moves slots.
const CONNECTION_MESSAGES =
  /Connection is closed|Command aborted due to connection close|Stream isn't writeable|isn't ready and enableOfflineQueue|None of startup nodes|Failed to refresh slots cache|same slots allocation group|max retries per request|Command timed out|Too many Cluster redirections|^(CLUSTERDOWN|LOADING|MASTERDOWN|TRYAGAIN|MOVED|ASK)\b|^UNBLOCKED force unblock from blocking operation, instance state changed/i;

/** Errors that mean "Redis cannot be reached right now"; script and logic errors are not among them. */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && CONNECTION_CODES.has(code)) return true;
  return err.name === "MaxRetriesPerRequestError" || err.name === "ClusterAllFailedError" || CONNECTION_MESSAGES.test(err.message);
}

/** Runs one Redis call; a connection failure becomes a {@link StoreUnavailableError} that says what is down and why. */
export type RedisCall = <T>(run: () => Promise<T>) => Promise<T>;

/**
 * The one way every store turns a Redis outage into `StoreUnavailableError` (→ `unavailable`, HTTP 503). Time bounds
 * come from the client's own `commandTimeout` (connectRedis sets it), so a silent server fails the call too. The
 * message names the last connection error the client reported (e.g. "connect ECONNREFUSED 127.0.0.1:6390").
 */
export function redisCaller(client: RedisClient): RedisCall {
  const cause = trackConnectionCause(client);
  return async (run) => {
    try {
      return await run();
    } catch (err) {
      if (!isConnectionError(err)) throw err;
      throw new StoreUnavailableError(`Redis at ${addressOf(client)} is unavailable (${cause() ?? plainCause(err as Error)}): ${RETRY_WHEN_BACK}`, { cause: err });
    }
  };
}

/** The last connection error the client reported, until it is ready again. */
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

/**
 * Why Redis cannot serve right now, or undefined when it answers a PING within `timeoutMs`: for readiness probes,
 * which must see a stopped server (client reconnecting) and a silent one (PING times out) alike.
 */
export async function redisDownReason(client: RedisClient, timeoutMs = 1000): Promise<string | undefined> {
  if (client.status !== "ready") return `not connected (${client.status})`;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([client.ping(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer to PING within ${timeoutMs} ms`)), timeoutMs)))]);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  } finally {
    clearTimeout(timer);
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
