import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "./logger.js";

/**
 * Thrown by a store adapter when its backing store cannot be reached (connection refused, closed, timed out).
 * Services answer it with `unavailable` (HTTP 503); any other unexpected error is a bug (`internal`).
 */
export class StoreUnavailableError extends Error {
  override readonly name = "StoreUnavailableError";
}

/** Expected failures pass through; store outages become `unavailable`; anything else is logged and hidden. */
export function toConnectError(err: unknown, logger: Logger): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof StoreUnavailableError) return new ConnectError(err.message, Code.Unavailable);
  logger.error({ err }, "unexpected error in a handler");
  return new ConnectError("internal error: the server logged the details", Code.Internal);
}

async function* mapStreamErrors<T>(stream: AsyncIterable<T>, logger: Logger): AsyncIterable<T> {
  try {
    yield* stream;
  } catch (err) {
    throw toConnectError(err, logger);
  }
}

/** A server interceptor that applies {@link toConnectError} to unary and streaming handlers alike. */
export function errorInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      const res = await next(req);
      return res.stream ? { ...res, message: mapStreamErrors(res.message, logger) } : res;
    } catch (err) {
      throw toConnectError(err, logger);
    }
  };
}
