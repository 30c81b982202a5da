import { ScalarType, type DescService, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import multipart from "@fastify/multipart";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { BodyLimit } from "@gov/service-kit";
import { bodyLimitOptions, routeBodyLimit } from "../errors.js";
import { headerForwarder, type HeaderForwarder } from "./forward-headers.js";
import { buildRequest, tooLarge } from "./request.js";
import { DEFAULT_RESPONSE_OPTIONS, entityTagOf, isHttpBody, prepareAnswer, sendEventStream, sendHttpBodyStream, sendUnaryResponse, type ResponseOptions } from "./response.js";
import { restRoutesOf, takesRawContent, type RestRoute } from "./rest-routes.js";

/**
 * The deadline of an upload's call (an import). A remote transport gives unary calls a short default deadline (10 s),
 * which a 1,000-entry import against a slow store can outlast — and a deadline that fires part way leaves no per-entry
 * answer. The client hanging up still cancels it at once (`clientGoneSignal`).
 */
const LONG_CALL_DEADLINE_MS = 10 * 60_000;

/** A body-"*" rule with a bytes field: REST clients upload that field as a multipart file part. */
function takesFile(route: RestRoute): boolean {
  return route.body === "*" && route.method.input.fields.some((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES);
}

/**
 * Aborted when the HTTP client goes away before its answer is complete, so that streams and long calls (an import)
 * stop server-side too. The response is watched, not the request: a request emits "close" as soon as its body has
 * been read, which for an upload is long before the work is done.
 */
function clientGoneSignal(reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  reply.raw.once("close", () => reply.raw.writableFinished || ac.abort());
  return ac.signal;
}

/** A service behind the gateway; `rawBodyLimit`: its own limit for raw-content bodies (gov.limits.config-content). */
export interface RestService {
  service: DescService;
  transport: Transport;
  rawBodyLimit?: BodyLimit;
}

/** The REST body limits: `json` for every body but raw content and a form's file part (`fileSize`, gov.limits.zip-upload). */
export interface RestBodyLimits {
  json: BodyLimit;
  fileSize: number;
}

interface PlannedRoute {
  route: RestRoute;
  transport: Transport;
  bodyLimit: BodyLimit;
}

/**
 * A route's body limit, from what the rule makes its body: raw content (a string or bytes body field) is the service's
 * to bound, as its own content limit says, so a JSON limit set low does not refuse a config's text, nor one set high
 * let larger text in; every other body is JSON (a form's file part has its own limit) and gets the JSON limit.
 */
function bodyLimitOf(route: RestRoute, service: RestService, limits: RestBodyLimits): BodyLimit {
  if (service.rawBodyLimit && takesRawContent(route)) return service.rawBodyLimit;
  // An upload sent as JSON carries its file in base64 (4 bytes per 3): held to the upload limit as a form's file part
  // is, not to the JSON one (which let through archives of at most 768 KiB), plus room for the other fields.
  if (takesFile(route)) return { bytes: Math.max(limits.json.bytes, Math.ceil(limits.fileSize / 3) * 4 + 64 * 1024), setting: `${UPLOAD_SETTING} (in base64, in a JSON body)` };
  return limits.json;
}

const UPLOAD_SETTING = "gov.limits.zip-upload";

/**
 * Registers one Fastify route per annotated RPC: REST request → Connect request → service (through `transport`)
 * → REST response. Nothing here knows a particular service.
 */
export async function registerRestRoutes(
  app: FastifyInstance,
  services: RestService[],
  limits: RestBodyLimits,
  forwardHeaders: HeaderForwarder = headerForwarder([]),
  responses: ResponseOptions = DEFAULT_RESPONSE_OPTIONS,
): Promise<RestRoute[]> {
  const routes: PlannedRoute[] = [];
  for (const service of services) {
    for (const route of restRoutesOf([service.service])) routes.push({ route, transport: service.transport, bodyLimit: bodyLimitOf(route, service, limits) });
  }
  for (const r of routes.filter((r) => !takesFile(r.route))) addRoute(app, r, forwardHeaders, responses);
  // Multipart parsing adds hooks to every request of its scope; only routes that take a file get that scope.
  await app.register(async (uploads) => {
    await uploads.register(multipart, { limits: { fileSize: limits.fileSize, files: 1, fields: 20, parts: 21 }, throwFileSizeLimit: true });
    for (const r of routes.filter((r) => takesFile(r.route))) addRoute(uploads, r, forwardHeaders, responses);
  });
  return routes.map((r) => r.route);
}

/** Aborted with `unavailable` unless cleared within `ms`: a stream that does not start in time (see streamStartMs). */
function startDeadline(ms: number): { signal: AbortSignal; clear: () => void } {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new ConnectError(`the service did not start the stream within ${ms / 1000} s: retry when it answers again`, Code.Unavailable)), ms);
  return { signal: ac.signal, clear: () => clearTimeout(timer) };
}

function refuseDeclaredOverLimit(req: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void {
  const declared = Number(req.headers["content-length"]);
  const limit = routeBodyLimit(req);
  done(limit && declared > limit.bytes ? tooLarge(req, declared) : undefined);
}

async function* single<T>(message: T): AsyncIterable<T> {
  yield message;
}

/**
 * The route's handler calls the transport directly (what a Connect client does, minus a layer on the hot path). The
 * route's body limit refuses a larger declared length before any byte is buffered, and its 413 names the setting.
 */
function addRoute(app: FastifyInstance, { route, transport, bodyLimit }: PlannedRoute, forwardHeaders: HeaderForwarder, responses: ResponseOptions): void {
  const method = route.method as never;
  const etagOf = entityTagOf(route);
  // Uploads are the long unary calls; the rest answer in well under a millisecond and skip the per-request signal.
  const long = takesFile(route);
  const rawContent = takesRawContent(route);
  app.route({
    method: route.httpMethod,
    url: route.fastifyPath,
    ...bodyLimitOptions(bodyLimit, rawContent),
    // Raw content declared larger than its limit is refused before any byte is read (Fastify's own check holds a
    // route to its larger JSON-string limit, see jsonStringBytes).
    onRequest: (rawContent ? [refuseDeclaredOverLimit] : []) as never,
    handler: async (req, reply) => {
      const built = buildRequest(route, req);
      const input = built instanceof Promise ? await built : built; // an await costs microtask turns: only for uploads
      const headers = forwardHeaders(req);
      if (route.method.methodKind === "server_streaming") {
        const start = startDeadline(responses.streamStartMs);
        let res;
        try {
          res = await transport.stream(method, AbortSignal.any([clientGoneSignal(reply), start.signal]), undefined, headers, single(input) as never);
        } finally {
          start.clear(); // started (or failed): the stream lives as long as its client
        }
        const stream = res.message as AsyncIterable<Message>;
        if (isHttpBody(route.responseField)) return sendHttpBodyStream(route, reply, stream);
        return sendEventStream(reply, stream, route.method.output, responses);
      }
      const res = long
        ? await transport.unary(method, clientGoneSignal(reply), LONG_CALL_DEADLINE_MS, headers, input as never)
        : await transport.unary(method, undefined, undefined, headers, input as never);
      const ready = prepareAnswer(route.method.output, res.message as Message);
      if (ready) await ready;
      // Sent here (or, compressed, once awaited); not returned: the reply is a thenable, which the handler's promise
      // would adopt through a further microtask and a call of reply.then.
      const sent = sendUnaryResponse(route, reply, res.message as Message, etagOf, responses);
      if (sent instanceof Promise) await sent;
    },
  });
}
