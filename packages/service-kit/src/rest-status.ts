import { Code, type ConnectError } from "@connectrpc/connect";
import { LIMIT_METADATA } from "./limits.js";

/** The one code → HTTP status table of the REST API (contract §3; failed_precondition is 412 here, not Connect's 400). */
const STATUS: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 412,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

/**
 * The HTTP status the REST API answers `err` with — also what the audit log records for a call on any protocol, whose
 * resource and action are those of its REST route. A size limit is 413; resource_exhausted without the limit marker
 * (a quota) keeps the table's 429.
 */
export function restStatusOf(err: ConnectError): number {
  return err.code === Code.ResourceExhausted && err.metadata.has(LIMIT_METADATA) ? 413 : (STATUS[err.code] ?? 500);
}
