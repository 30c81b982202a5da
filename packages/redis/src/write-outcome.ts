import type { RedisClient } from "./connect.js";
import { durableWriterOf } from "./durable-write.js";
import { REFUSED_UNEXECUTED, type RedisCall } from "./outage.js";
import { nothingWritten, StoreUnavailableError, WriteOutcomeUnknownError } from "./store-errors.js";

/**
 * What a failed Redis write tells the caller, for every store. A write that never left this process (client not
 * connected, server refused it unexecuted) wrote nothing: plain `unavailable`. A write that was sent and then got no
 * answer (command timeout on a paused server, connection reset while in flight) may have been applied: the caller is
 * told that the outcome is unknown and how to find out, rather than "retry". Stores say what the write was and how
 * to check it; this module decides which of the two it is.
 */

/** Failures that prove the command was not executed: it was never written to a socket, or the server refused it. */
// A redirection chain whose last answer was a refusal (MOVED, ASK, CLUSTERDOWN, TRYAGAIN): no node executed the command.
const NOT_SENT_MESSAGES =
  /Stream isn't writeable|isn't ready and enableOfflineQueue|None of startup nodes|Failed to refresh slots cache|same slots allocation group|^(CLUSTERDOWN|LOADING|MASTERDOWN|TRYAGAIN|MOVED|ASK)\b|^Too many Cluster redirections\. Last error: ReplyError: (MOVED|ASK|CLUSTERDOWN|TRYAGAIN)\b/i;
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);

function provesNotSent(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && NOT_SENT_CODES.has(code)) return true;
  if (err.name === "ClusterAllFailedError") return true;
  return NOT_SENT_MESSAGES.test(err.message) || REFUSED_UNEXECUTED.test(err.message);
}

/**
 * Whether a write issued now may be sent: the client is connected, or it has an offline queue (which sends a queued
 * write once it reconnects, even after the caller gave up on it) — or the same holds for the connection that carries
 * its durable writes (see requireReplicas). Read it before issuing the write.
 */
export function writeMaySend(client: RedisClient): boolean {
  const writer = durableWriterOf(client);
  return maySendOn(client) || (writer !== undefined && maySendOn(writer));
}

const maySendOn = (client: RedisClient) => client.status === "ready" || client.options.enableOfflineQueue === true;

export interface FailedWrite {
  /** The write, for the message: e.g. `the write of config "app.yaml" in namespace "{dev}"`. */
  what: string;
  /** How the caller learns whether it was applied (and whether repeating it is safe). */
  howToCheck: string;
}

/**
 * Rewrites a store failure of a write (a StoreUnavailableError from `redisCaller`): WriteOutcomeUnknownError when it
 * may have been applied, else a StoreUnavailableError saying that nothing was written. `maySend`: see
 * {@link writeMaySend}. Returns `err` unchanged when it is not a store outage.
 */
export function describeWriteFailure(err: unknown, maySend: boolean, write: FailedWrite): unknown {
  if (!(err instanceof StoreUnavailableError) || err instanceof WriteOutcomeUnknownError) return err;
  if (maySend && !provesNotSent(err.cause)) {
    const cause = err.cause instanceof Error ? err.cause.message : String(err.cause);
    return new WriteOutcomeUnknownError(`${write.what} was sent to Redis but got no answer (${cause}), so it may or may not have been applied: ${write.howToCheck}`, {
      cause: err.cause,
    });
  }
  return nothingWritten(err);
}

/**
 * A store's write through `call` (its `redisCaller`): a connection failure answers "outcome unknown" when the write may
 * have reached Redis and "nothing was written" when it provably did not. Each write names its target (`W`: whatever
 * the store identifies a write by), and `describe` turns that into the message's words only when a write fails: the
 * strings cost a write on the hot path ~0.5 µs each time (a profiled config `PUT`) when built up front.
 */
export function redisWriteCaller<W>(client: RedisClient, call: RedisCall, describe: (write: W) => FailedWrite) {
  // `call`'s own mapping in this function's catch: the same errors, one async step less on every write
  return async <T>(write: W, run: () => Promise<T>): Promise<T> => {
    const maySend = writeMaySend(client); // read before the write is issued
    try {
      return await run();
    } catch (err) {
      throw describeWriteFailure(call.failure(err), maySend, describe(write));
    }
  };
}
