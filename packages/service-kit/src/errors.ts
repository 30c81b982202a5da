import { Code, ConnectError, type Interceptor, type StreamRequest, type UnaryRequest } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import type { Logger } from "./logger.js";
import { outageAnswersOf } from "./outage-answers.js";

// Defined in @gov/redis (which raises them for outages and unanswered writes) so that this package can depend on it
// without a cycle. WriteOutcomeUnknownError: a write that may or may not have been applied (→ deadline_exceeded, 504).
import { nothingWritten, StoreUnavailableError, withoutRetryAdvice, WriteOutcomeUnknownError } from "@gov/redis";
export { nothingWritten, StoreUnavailableError, withoutRetryAdvice, WriteOutcomeUnknownError };

/**
 * Expected failures pass through; store outages become `unavailable` (or `deadline_exceeded` when a write's outcome is
 * unknown); anything else is logged (a bug: at error, with its stack) and hidden. Outages are not logged here: see
 * {@link errorInterceptor}, which logs each answer once.
 */
export function toConnectError(err: unknown, logger: Logger): ConnectError {
  if (err instanceof ConnectError) return err;
  const outage = outageError(err);
  if (outage) return outage;
  logger.error({ err }, "unexpected error in a handler");
  return new ConnectError("internal error: the server logged the details", Code.Internal);
}

/** A store outage as the Connect error it is answered with: `unavailable`, or `deadline_exceeded` for a write whose outcome is unknown. */
export function outageError(err: unknown): ConnectError | undefined {
  if (err instanceof WriteOutcomeUnknownError) return new ConnectError(err.message, Code.DeadlineExceeded);
  if (err instanceof StoreUnavailableError) return new ConnectError(err.message, Code.Unavailable);
  return undefined;
}

/**
 * An error as the fields of a warning about a failure that an outage explains (a store that cannot be reached, a lock
 * that could not be extended): its type and message, without the stack, which would only show the client library's
 * internals on every such line (`error: {type, message}`). `expected` defaults to "a store outage"; any other error is
 * logged whole under `err`, stack included, since it may be a bug.
 */
export function outageLogFields(err: unknown, expected = err instanceof StoreUnavailableError || err instanceof WriteOutcomeUnknownError): { err: unknown } | { error: { type: string; message: string } } {
  if (!expected || !(err instanceof Error)) return { err };
  // not under `err`, which pino's error serializer would give a stack again
  return { error: { type: err.name, message: err.message } };
}

/** Connect aborts a call's signal with `deadline_exceeded` when its deadline passes. */
const deadlinePassed = (signal: AbortSignal) => signal.aborted && signal.reason instanceof ConnectError && signal.reason.code === Code.DeadlineExceeded;

/** The answer to a failed call; outage answers (`unavailable`, `deadline_exceeded`) are logged per episode, see outageAnswers. */
function answerFailure(err: unknown, req: UnaryRequest | StreamRequest, logger: Logger): ConnectError {
  // A deadline the client set has passed: its own choice, not an outage (a stream ends with it, whatever stopped it).
  const clientDeadline = deadlinePassed(req.signal);
  if (clientDeadline && req.stream) return req.signal.reason as ConnectError;
  // The client went away (a cancelled stream, a reset h2 stream): what broke is the call's own I/O
  // (ERR_STREAM_PREMATURE_CLOSE and the like), which is no bug of ours and nobody is left to answer.
  if (req.signal.aborted && !clientDeadline && !(err instanceof ConnectError) && !(err instanceof StoreUnavailableError)) {
    return new ConnectError("the client cancelled the call", Code.Canceled);
  }
  const answer = toConnectError(err, logger);
  // An in-process call is answered to a caller in this process (the REST gateway), which logs what it answers itself.
  if (OUTAGE_CODES.has(answer.code) && !clientDeadline && !req.url.startsWith("in-process:")) {
    // Expected while a store is down: the first answer of the episode at warn, then counts (outage-answers.ts); no
    // stack (it would only show the client library's internals).
    outageAnswersOf(logger).report(codeToString(answer.code), { rpc: `${req.service.typeName}/${req.method.name}` }, answer.rawMessage);
  }
  return answer;
}

const OUTAGE_CODES = new Set([Code.Unavailable, Code.DeadlineExceeded]);

async function* mapStreamErrors<T>(stream: AsyncIterable<T>, req: StreamRequest, logger: Logger): AsyncIterable<T> {
  try {
    yield* stream;
  } catch (err) {
    throw answerFailure(err, req, logger);
  }
  // A stream that ends because its deadline passed (watches stop on ctx.signal) did not succeed: say so.
  if (deadlinePassed(req.signal)) throw req.signal.reason;
}

/** A server interceptor that applies {@link toConnectError} to unary and streaming handlers alike. */
export function errorInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      const res = await next(req);
      return res.stream ? { ...res, message: mapStreamErrors(res.message, req as StreamRequest, logger) } : res;
    } catch (err) {
      throw answerFailure(err, req, logger);
    }
  };
}
