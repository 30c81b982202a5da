import { Code, type ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import { LIMIT_METADATA } from "./limits.js";

/**
 * The HTTP status the REST API answers `err` with — also what the audit log records for a call on any protocol, whose
 * resource and action are those of its REST route. A size limit is 413; resource_exhausted without the limit marker
 * (a quota) keeps the table's 429.
 */
export function restStatusOf(err: ConnectError): number {
  return err.code === Code.ResourceExhausted && err.metadata.has(LIMIT_METADATA) ? 413 : connectHttpStatus(err.code);
}

/**
 * The one code → HTTP status table of REST and Connect unary errors: Connect's mapping, except failed_precondition,
 * which is 412 (contract §3 gives one table for REST and Connect alike; Connect's own says 400). Connect clients take
 * the code from the body, not the status, so this changes nothing for them; it is for proxies, logs and plain HTTP
 * clients.
 */
export function connectHttpStatus(code: Code): number {
  return code === Code.FailedPrecondition ? 412 : codeToHttpStatus(code);
}
