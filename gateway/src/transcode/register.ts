import type { DescService, Message } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { buildRequest } from "./request.js";
import { isHttpBody, responseJson, sendEventStream, sendHttpBodyStream } from "./response.js";
import { restRoutesOf, type RestRoute } from "./rest-routes.js";

type AnyClient = Record<string, (req: Message, options?: { signal?: AbortSignal; headers?: HeadersInit }) => unknown>;

/** Aborted when the HTTP client goes away, so that streams and long calls stop server-side too. */
function requestSignal(req: FastifyRequest): AbortSignal {
  const ac = new AbortController();
  req.raw.once("close", () => ac.abort());
  return ac.signal;
}

/** Headers forwarded to the services as Connect metadata (identity, tracing, topology). */
function forwardHeaders(req: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ["authorization", "x-gov-consumer", "x-request-id", "x-forwarded-for"]) {
    const v = req.headers[name];
    if (typeof v === "string") out[name] = v;
  }
  return out;
}

/**
 * Registers one Fastify route per annotated RPC: REST request → Connect request → service (through `transport`)
 * → REST response. Nothing here knows a particular service.
 */
export function registerRestRoutes(app: FastifyInstance, services: { service: DescService; transport: Transport }[]): RestRoute[] {
  const all: RestRoute[] = [];
  for (const { service, transport } of services) {
    const client = createClient(service, transport) as unknown as AnyClient;
    for (const route of restRoutesOf([service])) {
      all.push(route);
      const call = client[route.method.localName].bind(client);
      app.route({
        method: route.httpMethod,
        url: route.fastifyPath,
        handler: async (req, reply) => {
          const input = await buildRequest(route, req);
          const headers = forwardHeaders(req);
          if (route.method.methodKind === "server_streaming") {
            const stream = call(input, { signal: requestSignal(req), headers }) as AsyncIterable<Message>;
            if (isHttpBody(route.responseField)) return sendHttpBodyStream(route, reply, stream);
            return sendEventStream(route, reply, stream, route.method.output);
          }
          const output = (await call(input, { headers })) as Message;
          // Serialized here: a bare string result must still be JSON ("{dev}"), which reply.send would send as text.
          return reply.type("application/json").send(JSON.stringify(responseJson(route, output)));
        },
      });
    }
  }
  return all;
}
