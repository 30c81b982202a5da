import { Code, ConnectError } from "@connectrpc/connect";

/** Metadata key that marks a `resource_exhausted` as a size limit (REST answers 413) and names its setting. */
export const LIMIT_METADATA = "gov-limit";

/**
 * A request over a size limit: `resource_exhausted` on every protocol (413 on REST), with a message that says the size,
 * the limit and the setting that raises it — never the oversized input itself.
 */
export function limitExceeded(what: string, size: number, limit: number, setting: string): ConnectError {
  return new ConnectError(`${what} is ${size} bytes, over the limit of ${limit} bytes (${setting})`, Code.ResourceExhausted, { [LIMIT_METADATA]: setting });
}
