import { Code, ConnectError } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { answerUnknownRpc, clientErrorHandler, excerpt, frameworkErrorHandler, hasEmptySegment, outageAnswersOf, restStatusOf, routerRefusal, wrongMethodRefuser, type BodyLimit, type Logger } from "@gov/service-kit";
import { gatewaySettings } from "./settings.js";

/** Connect's wire names: invalid_argument, not_found, ... */
export function codeName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

export interface RestError {
  status: number;
  body: { code: string; message: string };
}

/** An HTTP-level refusal raised by the transcoder itself (e.g. 415), answered with its status and a Connect code. */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly connectCode: string,
    message: string,
  ) {
    super(message);
  }
}

/** The limits the REST answers name (defaults match the settings' defaults). */
export interface ErrorLimits {
  /** The body limit of a request with no route's own (see routeBodyLimit): gov.limits.json-body. */
  maxJsonBody?: number;
  /** The setting behind maxJsonBody (default gov.limits.json-body). */
  maxJsonBodySetting?: string;
  maxZipBytes?: number;
  requestTimeoutMs?: number;
  /** The body's size as its Content-Length declares it, for an over-limit body's answer (none when sent chunked). */
  declaredBytes?: number;
}

export { excerpt };

/** The setting an over-limit body names by default (the gateway's own body limit). */
export const JSON_BODY_SETTING = gatewaySettings.maxJsonBody.name;

/** What a body over its limit is told: its size when known (its Content-Length), the limit, the setting that raises it. */
export const bodyOverLimit = (bytes: number | undefined, limit: BodyLimit) =>
  `the request body${bytes ? ` (${bytes} bytes)` : ""} is over the limit of ${limit.bytes} bytes (${limit.setting}): send a smaller body, or raise the setting`;

/** A media type that is JSON (`application/json`, `application/merge-patch+json` …). */
export const JSON_TYPE = /^application\/(.+\+)?json\b/i;

/**
 * How large a body holding raw content may be when it comes as a JSON string (what OpenAPI-generated clients send):
 * its escapes make it larger than the content it unwraps to (a newline is two bytes, a control character six), so
 * content within the limit must not be refused for its wrapping; the content itself is held to the limit once
 * unwrapped.
 */
export const jsonStringBytes = (contentBytes: number) => contentBytes * 6 + 2;

/**
 * Route options giving a REST route its own body limit (Fastify's `bodyLimit`) and the setting behind it. `rawContent`:
 * the body is raw content, held to `limit` as sent, or to {@link jsonStringBytes} of it as a JSON string.
 */
export function bodyLimitOptions(limit: BodyLimit, rawContent = false): { bodyLimit: number; config: { bodyLimitSetting: string; contentBytes: number | undefined } } {
  if (!rawContent) return { bodyLimit: limit.bytes, config: { bodyLimitSetting: limit.setting, contentBytes: undefined } };
  return { bodyLimit: jsonStringBytes(limit.bytes), config: { bodyLimitSetting: limit.setting, contentBytes: limit.bytes } };
}

/** The body limit that applies to this request, as bodyLimitOptions gave its route; undefined off the REST routes. */
export function routeBodyLimit(req: FastifyRequest): BodyLimit | undefined {
  const config = req.routeOptions.config as { bodyLimitSetting?: string; contentBytes?: number } | undefined;
  const setting = config?.bodyLimitSetting;
  if (setting === undefined) return undefined;
  if (config!.contentBytes === undefined) return { bytes: req.routeOptions.bodyLimit, setting };
  // raw content: as sent, the content's own limit; as a JSON string, that limit's wrapped size
  return JSON_TYPE.test(req.headers["content-type"] ?? "")
    ? { bytes: req.routeOptions.bodyLimit, setting: `${setting}, ×6 + 2 for content sent as a JSON string` }
    : { bytes: config!.contentBytes, setting };
}

/** A body over the limit is told its route's limit (a JSON body's or a raw content's), not the gateway's default. */
function limitsFor(req: FastifyRequest, err: unknown, limits: ErrorLimits): ErrorLimits {
  if ((err as FastifyError).code !== "FST_ERR_CTP_BODY_TOO_LARGE") return limits;
  const route = routeBodyLimit(req);
  const declared = Number(req.headers["content-length"]);
  return {
    ...limits,
    ...(route ? { maxJsonBody: route.bytes, maxJsonBodySetting: route.setting } : {}),
    ...(Number.isSafeInteger(declared) && declared > 0 ? { declaredBytes: declared } : {}),
  };
}

/** Fastify's and @fastify/multipart's own errors, by code: a contract status, a Connect code, a message that helps. */
function fromFastifyError(err: FastifyError, limits: ErrorLimits): RestError | undefined {
  const answer = (status: number, code: string, message: string): RestError => ({ status, body: { code, message } });
  switch (err.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return answer(413, "resource_exhausted", bodyOverLimit(limits.declaredBytes, { bytes: limits.maxJsonBody ?? 1048576, setting: limits.maxJsonBodySetting ?? JSON_BODY_SETTING }));
    case "FST_REQ_FILE_TOO_LARGE":
      return answer(413, "resource_exhausted", `the uploaded file is over the limit of ${limits.maxZipBytes ?? 16777216} bytes (gov.limits.zip-upload): send a smaller archive`);
    case "FST_FILES_LIMIT":
      return answer(400, "invalid_argument", "the form carries more than one file: send the archive as the one file part (importZip) and other fields (policy) as text");
    case "FST_PARTS_LIMIT":
    case "FST_FIELDS_LIMIT":
      return answer(413, "resource_exhausted", "the form has too many parts: send one file part (importZip) and at most a few text fields");
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return answer(400, "invalid_argument", "the body is not as long as its Content-Length says: send the whole body");
  }
  const refused = routerRefusal(err);
  if (refused) return refused;
  const status = err.statusCode;
  if (!status || status < 400 || status >= 500) return undefined;
  const code = status === 404 ? "not_found" : status === 408 ? "deadline_exceeded" : status === 413 || status === 429 ? "resource_exhausted" : "invalid_argument";
  return answer(status, code, excerpt(err.message));
}

export function toRestError(err: unknown, limits: ErrorLimits = {}): RestError {
  if (err instanceof ConnectError) return { status: restStatusOf(err), body: { code: codeName(err.code), message: err.rawMessage } };
  if (err instanceof HttpError) return { status: err.statusCode, body: { code: err.connectCode, message: err.message } };
  return fromFastifyError(err as FastifyError, limits) ?? { status: 500, body: { code: "internal", message: "internal error: the server logged the details" } };
}

const pathOf = (req: FastifyRequest) => excerpt(req.url.split("?")[0]);

/**
 * Logs a failed answer: bugs at error with the stack; expected outages (503, unknown outcome 504) at warn without one,
 * the first answer of an outage whole and the rest counted (outageAnswers in @gov/service-kit): a line per request
 * during an outage would bury everything else.
 */
export function logFailure(req: FastifyRequest, err: unknown, rest: RestError, what = "request failed"): void {
  if (rest.status === 503 || rest.status === 504) {
    outageAnswersOf(req.log as Logger).report(rest.body.code, { reqId: req.id, method: req.method, path: pathOf(req) }, rest.body.message);
  } else if (rest.status >= 500) {
    req.log.error({ err, reqId: req.id, method: req.method, path: pathOf(req) }, what);
  }
}

/**
 * The RPCs of the services a gateway reaches over the network: it serves them as REST only (its port serves the
 * Connect and gRPC-Web routes of the services in its own process), so a Connect or gRPC-Web call of one is told where
 * to go rather than to check a method name that is right. Undefined for any other path.
 */
export function remoteRpcs(remote: readonly DescService[]): (path: string) => string | undefined {
  const byPath = new Map<string, string>();
  for (const service of remote) for (const method of service.methods) byPath.set(`/${service.typeName}/${method.name}`, service.typeName);
  return (path) => {
    const service = byPath.get(path);
    return service && `${path} is not served on this port: this gateway reaches ${service} over the network and serves it as REST (/v1) only; send Connect and gRPC-Web calls to that service's own port, gRPC to its gRPC port`;
  };
}

/** Every failure, whatever raised it, leaves as `{code, message}` with the status of the table above. */
export function installErrorHandlers(app: FastifyInstance, limits: ErrorLimits = {}, servedElsewhere?: (path: string) => string | undefined): void {
  const refuseWrongMethod = wrongMethodRefuser(app);
  const notFound = (req: FastifyRequest, reply: FastifyReply): void => {
    if (answerUnknownRpc(req, reply, servedElsewhere)) return; // gRPC-Web / Connect clients get unimplemented in their protocol
    if (refuseWrongMethod(req, reply)) return;
    const path = req.url.split("?")[0];
    const hint = hasEmptySegment(path)
      ? `a path segment is empty (a trailing or doubled "/"): remove it`
      : "see /docs for the REST API; an id that holds \"/\" goes in one path segment, percent-encoded (dir%2Fdb.json)";
    void reply.status(404).send({ code: "not_found", message: `no endpoint ${req.method} ${excerpt(path)}: ${hint}` });
  };
  app.setErrorHandler((err, req, reply) => {
    // A body Fastify could not parse (bad JSON, over its limit) on a path that has no route: what the caller must fix
    // first is the path or method, so it gets the same 404 / 405 / unimplemented as with a good body.
    if (req.is404) return notFound(req, reply);
    const rest = toRestError(err, limitsFor(req, err, limits));
    logFailure(req, err, rest);
    // RFC 9110 §11.6.1: a 401 names the scheme to authenticate with (as the management port's do); HTTP clients that
    // retry with credentials only when asked look for it
    if (rest.status === 401) void reply.header("www-authenticate", "Bearer");
    void reply.status(rest.status).type("application/json").send(rest.body);
  });
  app.setNotFoundHandler(notFound);
}

/** Fastify's `frameworkErrors` and `clientErrorHandler`: the same on the gateway as on every service listener. */
export { clientErrorHandler, frameworkErrorHandler };
