/**
 * Thrown by a store adapter when its backing store cannot be reached (connection refused, closed, timed out).
 * Services answer it with `unavailable` (HTTP 503); any other unexpected error is a bug (`internal`).
 *
 * Defined here, in the lowest package a store adapter reaches, so that this package can raise it and
 * `@gov/service-kit` (which opens the process's Redis client) can map it without a dependency cycle;
 * `@gov/service-kit` re-exports it, which is where services import it from.
 */
export class StoreUnavailableError extends Error {
  override readonly name: string = "StoreUnavailableError";
}

/**
 * A write that reached the store but got no answer in time (e.g. a paused Redis): it may or may not have been applied.
 * Answered with `deadline_exceeded` (HTTP 504), whose gRPC meaning is exactly that, instead of `unavailable`, which
 * clients read as "nothing happened, retry". It is a StoreUnavailableError, so batch code that stops on outages stops.
 * Defined here, next to its base, so that `write-outcome.ts` can raise it; `@gov/service-kit` re-exports it.
 */
export class WriteOutcomeUnknownError extends StoreUnavailableError {
  override readonly name: string = "WriteOutcomeUnknownError";
}

/**
 * A write that asked to fail closed (`failUnderReplicated`, see durable-write.ts) and that WAIT saw on fewer replicas
 * than `gov.redis.min-replicas` in time. The master applied it, and `reply` is its answer there, so a caller can undo
 * it; what it handed out (an id range, a machine-id lease) must not be used, since a failover could hand it out again.
 * A StoreUnavailableError: the replicas the policy needs are not there.
 */
export class UnderReplicatedWriteError extends StoreUnavailableError {
  override readonly name: string = "UnderReplicatedWriteError";
  constructor(
    message: string,
    readonly reply: unknown,
  ) {
    super(message);
  }
}

/** The advice every store outage's message ends with (see `redisCaller`). */
export const RETRY_WHEN_BACK = "retry when it is back";
const ENDS_WITH_ADVICE = new RegExp(`: ${RETRY_WHEN_BACK}$`);

/** An error's message without that closing advice, for an answer that quotes the outage and gives advice of its own. */
export function withoutRetryAdvice(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(ENDS_WITH_ADVICE, "");
}

/**
 * A store outage met by a write before anything of it was sent — by the store itself, or before the call reached its
 * handler (the caller's token could not be checked) — as the refusal that says so: "nothing was written", so that the
 * client knows a retry cannot apply it twice. Anything else (a WriteOutcomeUnknownError above all) is returned as is.
 */
export function nothingWritten(err: unknown): unknown {
  if (!(err instanceof StoreUnavailableError) || err instanceof WriteOutcomeUnknownError || err instanceof UnderReplicatedWriteError || err.message.includes("nothing was written")) return err;
  const message = err.message.endsWith(RETRY_WHEN_BACK) ? `${err.message.slice(0, -RETRY_WHEN_BACK.length)}nothing was written; ${RETRY_WHEN_BACK}` : `${err.message}; nothing was written`;
  return new StoreUnavailableError(message, { cause: err.cause });
}
