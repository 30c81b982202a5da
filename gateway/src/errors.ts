import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyError, FastifyInstance } from "fastify";

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

/** Connect's wire names: invalid_argument, not_found, ... */
export function codeName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

export interface RestError {
  status: number;
  body: { code: string; message: string };
}

/** Fastify's own 4xx errors (bad JSON, body too large, bad multipart) keep their status with a Connect code. */
function fromFastifyError(err: FastifyError): RestError | undefined {
  const status = err.statusCode;
  if (!status || status < 400 || status >= 500) return undefined;
  if (status === 413) return { status, body: { code: "resource_exhausted", message: `${err.message}: send a smaller body` } };
  const code = status === 404 ? "not_found" : status === 429 ? "resource_exhausted" : "invalid_argument";
  return { status, body: { code, message: err.message } };
}

export function toRestError(err: unknown): RestError {
  if (err instanceof ConnectError) return { status: STATUS[err.code] ?? 500, body: { code: codeName(err.code), message: err.rawMessage } };
  return fromFastifyError(err as FastifyError) ?? { status: 500, body: { code: "internal", message: "internal error: the server logged the details" } };
}

/** Every failure, whatever raised it, leaves as `{code, message}` with the status of the table above. */
export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((err, req, reply) => {
    const rest = toRestError(err);
    if (rest.status >= 500) req.log.error({ err, reqId: req.id, method: req.method, url: req.url }, "request failed");
    void reply.status(rest.status).type("application/json").send(rest.body);
  });
  app.setNotFoundHandler((req, reply) => {
    void reply
      .status(404)
      .send({ code: "not_found", message: `no endpoint ${req.method} ${req.url.split("?")[0]}: see /docs for the REST API` });
  });
}
