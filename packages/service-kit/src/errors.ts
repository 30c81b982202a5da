import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "./logger.js";

// Defined in @gov/redis (which raises it for outages) so that this package can depend on it without a cycle.
import { StoreUnavailableError } from "@gov/redis";
export { StoreUnavailableError };

/**
 * A write that reached the store but got no answer in time (e.g. a paused Redis): it may or may not have been applied.
 * Answered with `deadline_exceeded` (HTTP 504), whose gRPC meaning is exactly that, instead of `unavailable`, which
 * clients read as "nothing happened, retry". It is a StoreUnavailableError, so batch code that stops on outages stops.
 */
export class WriteOutcomeUnknownError extends StoreUnavailableError {
  override readonly name: string = "WriteOutcomeUnknownError";
}

/** Expected failures pass through; store outages become `unavailable`; anything else is logged and hidden. */
export function toConnectError(err: unknown, logger: Logger): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof WriteOutcomeUnknownError) return new ConnectError(err.message, Code.DeadlineExceeded);
  if (err instanceof StoreUnavailableError) return new ConnectError(err.message, Code.Unavailable);
  logger.error({ err }, "unexpected error in a handler");
  return new ConnectError("internal error: the server logged the details", Code.Internal);
}

/** Connect aborts a call's signal with `deadline_exceeded` when its deadline passes. */
const deadlinePassed = (signal: AbortSignal) => signal.aborted && signal.reason instanceof ConnectError && signal.reason.code === Code.DeadlineExceeded;

async function* mapStreamErrors<T>(stream: AsyncIterable<T>, signal: AbortSignal, logger: Logger): AsyncIterable<T> {
  try {
    yield* stream;
  } catch (err) {
    throw deadlinePassed(signal) ? signal.reason : toConnectError(err, logger);
  }
  // A stream that ends because its deadline passed (watches stop on ctx.signal) did not succeed: say so.
  if (deadlinePassed(signal)) throw signal.reason;
}

/** A server interceptor that applies {@link toConnectError} to unary and streaming handlers alike. */
export function errorInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      const res = await next(req);
      return res.stream ? { ...res, message: mapStreamErrors(res.message, req.signal, logger) } : res;
    } catch (err) {
      throw toConnectError(err, logger);
    }
  };
}
