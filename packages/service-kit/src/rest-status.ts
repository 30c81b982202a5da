import { Code, type ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
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

/**
 * The HTTP status of a Connect unary error: Connect's mapping, except failed_precondition, which is 412 as on REST
 * (contract §3 gives one table for REST and Connect alike; Connect's own says 400). Connect clients take the code from
 * the body, not the status, so this changes nothing for them; it is for proxies, logs and plain HTTP clients.
 */
export function connectHttpStatus(code: Code): number {
  return code === Code.FailedPrecondition ? 412 : codeToHttpStatus(code);
}
