import { getOption, ScalarType, type DescField, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { download_media_type } from "@gov/api/gen/gov/api/v1/http_body_pb";
import { field_behavior, FieldBehavior } from "@gov/api/gen/google/api/field_behavior_pb";
import { Access, access } from "@gov/api/gen/gov/security/v1/access_pb";
import { codeName } from "./errors.js";
import { isHttpBody } from "./transcode/response.js";
import { isSecret, type RestRoute } from "./transcode/rest-routes.js";

type Schema = Record<string, unknown>;
/** Proto comments by full name (`pkg.Service.Method`, `pkg.Message.field`), as `npm run generate` writes them. */
export type ProtoDocs = Readonly<Record<string, string>>;

// Not `Error`: a generated client would shadow the language's own Error type with it.
const ERROR_SCHEMA = "GovError";

/** The error answers every operation may give: status → when. The statuses are those of errors.ts's code table. */
const ERROR_RESPONSES: [status: string, name: string, description: string][] = [
  ["400", "BadRequest", "`invalid_argument` / `out_of_range`: the request is malformed (the message says which part and how to fix it)"],
  ["401", "Unauthenticated", "`unauthenticated`: missing or invalid credentials"],
  ["403", "PermissionDenied", "`permission_denied`: the caller may not do this"],
  ["404", "NotFound", "`not_found`: no such config, version or endpoint (never an empty 200)"],
  ["405", "MethodNotAllowed", "`unimplemented`: this path does not take this method (the `Allow` header names those it takes)"],
  ["408", "RequestTimeout", "`deadline_exceeded`: the request did not arrive within `gov.limits.request-timeout`: send headers and body at once"],
  ["409", "Conflict", "`already_exists` / `aborted`: a conflicting change; retry"],
  ["412", "FailedPrecondition", "`failed_precondition`: the current state does not allow this"],
  ["413", "PayloadTooLarge", "`resource_exhausted`: the body or upload is over a limit (the message names the setting)"],
  ["415", "UnsupportedMediaType", "`invalid_argument`: a body sent as a form, or in an encoding or a content type this operation does not take (the message says how to send it)"],
  ["429", "TooManyRequests", "`resource_exhausted`: too many requests or open watches"],
  ["500", "Internal", "`internal`: a bug; the details are in the server's log, never in the answer"],
  ["503", "Unavailable", "`unavailable`: the store is unreachable (nothing was written) or the server is shutting down; retry"],
  ["504", "DeadlineExceeded", "`deadline_exceeded`: the store did not answer in time; a write may or may not have been applied (read to check; repeating the same PUT is safe)"],
];

/**
 * The comments of the services' proto files. protoc-gen-es leaves comments out of the runtime descriptors, so `npm run
 * generate` writes them next to each file's code (`<file>_docs.ts`, by packages/api/src/protoc-gen-docs.ts).
 */
export async function protoDocsOf(services: DescService[]): Promise<ProtoDocs> {
  const files = [...new Set(services.map((s) => s.file.name))];
  const loaded = await Promise.all(
    files.map(async (name) => {
      try {
        return ((await import(`@gov/api/gen/${name}_docs`)) as { docs: ProtoDocs }).docs;
      } catch {
        return {}; // a proto file without generated docs: the document lacks descriptions, nothing else
      }
    }),
  );
  return Object.assign({}, ...loaded) as ProtoDocs;
}

function scalarSchema(t: ScalarType): Schema {
  switch (t) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", format: "byte" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return { type: "string", format: "int64" }; // 64-bit integers travel as strings (contract §3)
    default:
      return { type: "integer", format: "int32" };
  }
}

/** A field the proto JSON mapping always writes in answers (the gateway renders with alwaysEmitImplicit). */
function alwaysPresent(f: DescField): boolean {
  if (f.fieldKind === "list" || f.fieldKind === "map") return true;
  if (f.fieldKind === "message") return false;
  return f.oneof === undefined && !f.proto.proto3Optional;
}

/** A comment's first paragraph is the summary, the rest the description. */
function splitComment(text: string | undefined): { summary?: string; description?: string } {
  if (!text) return {};
  const [first, ...rest] = text.split(/\n\s*\n/);
  return { summary: first.replace(/\s*\n\s*/g, " "), description: rest.join("\n\n") || undefined };
}

/** JSON schemas of proto messages, as the proto JSON mapping renders them, collected into components. */
class SchemaBuilder {
  readonly components: Record<string, Schema> = {};
  private readonly names = new Map<string, string>();

  constructor(
    private readonly docs: ProtoDocs,
    messages: DescMessage[],
  ) {
    // Components are named by the message's short name (no dots: generators turn dots into odd identifiers); two
    // messages sharing one are both qualified by their package (gov.config.v1.Config → GovConfigV1Config).
    const byShort = new Map<string, Set<string>>();
    for (const m of messages) (byShort.get(m.name) ?? byShort.set(m.name, new Set()).get(m.name)!).add(m.typeName);
    for (const [short, full] of byShort) {
      for (const typeName of full) this.names.set(typeName, full.size === 1 && short !== ERROR_SCHEMA ? short : typeName.split(".").map((p) => p[0].toUpperCase() + p.slice(1)).join(""));
    }
  }

  /** A field's own comment only (an answer's field: a same-named field elsewhere may mean something else). */
  ownDoc(f: DescField): string | undefined {
    return this.docs[`${f.parent.typeName}.${f.name}`];
  }

  /** A field's documentation: its own comment, else that of a same-named field of the file (namespace, config_id). */
  fieldDoc(f: DescField): string | undefined {
    const own = this.docs[`${f.parent.typeName}.${f.name}`];
    if (own) return own;
    const prefix = `${f.parent.file.proto.package}.`;
    const sameName = Object.keys(this.docs).filter((key) => key.startsWith(prefix) && key.endsWith(`.${f.name}`) && key.split(".").length === prefix.split(".").length + 1);
    const fromRequest = sameName.find((key) => key.split(".").at(-2)!.endsWith("Request"));
    return this.docs[fromRequest ?? sameName[0]];
  }

  message(desc: DescMessage): Schema {
    // Well-known types with a JSON form of their own (the proto JSON mapping): described as the message's fields, a
    // ListValue (the topology's producer lists) came out as {values: [Value]}, and generated clients read `.values`
    // of what is a bare array — Array.prototype.values, typed as fine, a TypeError when called.
    if (desc.typeName === "google.protobuf.Timestamp") return { type: "string", format: "date-time" };
    if (desc.typeName === "google.protobuf.Duration") return { type: "string", example: "60s" };
    if (desc.typeName === "google.protobuf.ListValue") return { type: "array", items: {} };
    if (desc.typeName === "google.protobuf.Struct") return { type: "object", additionalProperties: {} };
    if (desc.typeName === "google.protobuf.Value") return {};
    const name = this.names.get(desc.typeName) ?? desc.name;
    if (!this.components[name]) {
      this.components[name] = {}; // placeholder first: messages may refer to themselves
      const properties: Record<string, Schema> = {};
      for (const f of desc.fields) properties[f.jsonName] = this.documented(this.field(f), this.docs[`${desc.typeName}.${f.name}`]);
      const required = desc.fields.filter(alwaysPresent).map((f) => f.jsonName);
      this.components[name] = { type: "object", ...(this.docs[desc.typeName] ? { description: this.docs[desc.typeName] } : {}), properties, ...(required.length ? { required } : {}) };
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  field(f: DescField): Schema {
    switch (f.fieldKind) {
      case "scalar":
        return scalarSchema(f.scalar);
      case "enum":
        return { type: "string", enum: f.enum.values.map((v) => v.name) };
      case "message":
        return this.message(f.message);
      case "list":
        return { type: "array", items: f.listKind === "scalar" ? scalarSchema(f.scalar) : f.listKind === "enum" ? { type: "string", enum: f.enum.values.map((v) => v.name) } : this.message(f.message) };
      case "map":
        return { type: "object", additionalProperties: f.mapKind === "scalar" ? scalarSchema(f.scalar) : f.mapKind === "enum" ? { type: "string", enum: f.enum.values.map((v) => v.name) } : this.message(f.message) };
    }
  }

  /** A description next to a `$ref` is allowed in OpenAPI 3.1 (and shown by the docs). */
  documented(schema: Schema, doc: string | undefined): Schema {
    return doc ? { ...schema, description: doc } : schema;
  }
}

/** Every message the routes can answer with or take, for naming components before any is written. */
function messagesOf(routes: RestRoute[]): DescMessage[] {
  const seen = new Map<string, DescMessage>();
  const visit = (m: DescMessage) => {
    if (seen.has(m.typeName)) return;
    seen.set(m.typeName, m);
    for (const f of m.fields) if (f.message) visit(f.message);
  };
  for (const r of routes) {
    visit(r.method.input);
    visit(r.method.output);
  }
  return [...seen.values()];
}

function requestBody(route: RestRoute, b: SchemaBuilder): Schema | undefined {
  if (!route.body) return undefined;
  if (route.body !== "*") {
    const schema = b.field(route.body);
    const doc = b.fieldDoc(route.body);
    if (route.body.fieldKind !== "scalar") {
      // A map, message or repeated field: the body is that field's JSON, bare (see transcode/request.ts).
      return { required: true, description: `The ${route.body.jsonName} itself, as JSON.${doc ? `\n\n${doc}` : ""}`, content: { "application/json": { schema } } };
    }
    return {
      required: true,
      description:
        `The ${route.body.jsonName}: the raw request body, stored byte for byte whatever its content type.` +
        " One exception, for clients that JSON-encode a string body (as generated clients do): with Content-Type application/json," +
        ' a body that is exactly one JSON string is unwrapped (`"port: 8080"` stores `port: 8080`). To store a JSON string literally, quotes' +
        " included, send it as text/plain." +
        (doc ? `\n\n${doc}` : ""),
      content: {
        "text/plain": { schema },
        "application/json": { schema: { ...schema, description: "a JSON string, unwrapped before it is stored" } },
      },
    };
  }
  const bound = new Set(route.pathFields);
  const properties: Record<string, Schema> = {};
  const hasBytes = route.method.input.fields.some((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES);
  const required: string[] = [];
  for (const f of route.method.input.fields) {
    if (bound.has(f)) continue;
    const isBytes = f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES;
    // the file is what the call is about; other fields say so in the proto (google.api.field_behavior)
    if (isBytes || getOption(f, field_behavior).includes(FieldBehavior.REQUIRED)) required.push(f.jsonName);
    properties[f.jsonName] = b.documented(isBytes ? { type: "string", format: "binary" } : b.field(f), b.fieldDoc(f));
  }
  const form = { type: "object", properties, ...(required.length ? { required } : {}) };
  if (!hasBytes) return { required: true, content: { "application/json": { schema: form } } };
  // an upload: a form with the file as a part, or JSON with the file in base64 (as protobuf JSON writes bytes)
  const json = { ...form, properties: Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, v.format === "binary" ? { ...v, format: "byte", description: [v.description, "In a JSON body: the file in base64."].filter(Boolean).join("\n\n") } : v])) };
  return { required: true, content: { "multipart/form-data": { schema: form }, "application/json": { schema: json } } };
}

const isHashField = (f: DescField) => f.name === "hash" && f.fieldKind === "scalar" && f.scalar === ScalarType.STRING;

/** A message, or one of its message fields, with a content `hash`: what an SSE event's `id:` carries (see transcode/response.ts). */
const carriesHash = (desc: DescMessage) => desc.fields.some(isHashField) || desc.fields.some((f) => f.fieldKind === "message" && f.message.fields.some(isHashField));

/** Whether a route's JSON answer names its content by a `hash` (then the gateway sends an ETag and honours If-None-Match; see transcode/response.ts). */
function hasEntityTag(route: RestRoute): boolean {
  if (route.httpMethod !== "GET" || route.method.methodKind !== "unary") return false;
  const desc = route.responseField ? route.responseField.message : route.method.output;
  return !!desc && carriesHash(desc);
}

function successResponse(route: RestRoute, b: SchemaBuilder): Schema {
  if (route.method.methodKind === "server_streaming") {
    if (isHttpBody(route.responseField)) {
      // The service sets the file's type and name as it streams it; the proto says the type in advance (an option).
      const media = getOption(route.method, download_media_type) || "application/octet-stream";
      return {
        description: "the file, streamed",
        headers: { "Content-Disposition": { description: 'attachment; filename="…" (and filename*= for names beyond ASCII)', schema: { type: "string" } } },
        content: { [media]: { schema: { type: "string", format: "binary" } } },
      };
    }
    const event = b.message(route.method.output);
    const id = carriesHash(route.method.output)
      ? "its `id:` the `hash` it carries, which names the state the event leaves the client in (send it back as Last-Event-ID when reconnecting)"
      : "its `id:` empty (these events carry no content hash: a reconnect gets the current state again)";
    return {
      description: `Server-Sent Events: each event's \`data:\` is one ${String(event.$ref).split("/").pop()} as JSON, ${id}; an idle stream gets a comment line every \`gov.sse.heartbeat\` (15 s); a failure after the stream began arrives as an \`event: error\` whose data is a ${ERROR_SCHEMA}.`,
      content: { "text/event-stream": { schema: { type: "string" } } },
    };
  }
  const schema = route.responseField ? b.field(route.responseField) : b.message(route.method.output);
  const doc = route.responseField ? b.ownDoc(route.responseField) : undefined;
  if (!hasEntityTag(route)) return { description: doc ?? "OK", content: { "application/json": { schema } } };
  return {
    description: doc ?? "OK",
    headers: { ETag: { description: "the content hash, quoted; send it as If-None-Match to get 304 while nothing changed", schema: { type: "string" } } },
    content: { "application/json": { schema } },
  };
}

/**
 * The OpenAPI 3.1 document of the REST API, derived from the same proto annotations that drive the routes, with the
 * proto comments as summaries and descriptions. Built for client generators: a stable operationId per RPC
 * (`<Service>_<Method>`), dot-free component names, `required` on what answers always carry, every error status.
 */
export function buildOpenApi(routes: RestRoute[], info: { title: string; version: string }, docs: ProtoDocs = {}): Schema {
  const b = new SchemaBuilder(docs, messagesOf(routes));
  const paths: Record<string, Record<string, Schema>> = {};
  const services = new Map<string, DescService>();
  const responseRefs = Object.fromEntries(ERROR_RESPONSES.map(([status, name]) => [status, { $ref: `#/components/responses/${name}` }]));
  for (const route of routes) {
    services.set(route.service.typeName, route.service);
    const bound = new Set([...route.pathFields, ...(route.body && route.body !== "*" ? [route.body] : [])]);
    const query = route.method.input.fields.filter(
      (f) => !bound.has(f) && f.fieldKind === "scalar" && !isSecret(f) && (route.body !== "*" || f.scalar !== ScalarType.BYTES),
    );
    const { summary, description } = splitComment(docs[`${route.service.typeName}.${route.method.name}`]);
    const rpc = `Connect/gRPC: \`${route.service.typeName}/${route.method.name}\``;
    const conditional = hasEntityTag(route)
      ? [{ name: "If-None-Match", in: "header", required: false, description: "an ETag of an earlier answer: 304 while the content is unchanged", schema: { type: "string" } }]
      : [];
    const resume =
      route.method.methodKind === "server_streaming" && !isHttpBody(route.responseField)
        ? [{ name: "Last-Event-ID", in: "header", required: false, description: "the `id:` of the last event received: when it names the current state, that first event is not sent again", schema: { type: "string" } }]
        : [];
    const body = requestBody(route, b);
    // 413 and 415 are about request bodies; an operation without one cannot have a body too large or of a wrong kind
    const errors = Object.fromEntries(Object.entries(responseRefs).filter(([status]) => (status !== "413" && status !== "415") || body));
    const op: Schema = {
      operationId: `${route.service.name}_${route.method.name}`,
      tags: [route.service.name],
      summary: summary ?? route.method.name,
      description: description ? `${description}\n\n${rpc}` : rpc,
      parameters: [
        ...route.pathFields.map((f) => b.documented({ name: f.jsonName, in: "path", required: true, schema: b.field(f) }, b.fieldDoc(f))),
        ...query.map((f) => b.documented({ name: f.jsonName, in: "query", required: false, schema: b.field(f) }, b.fieldDoc(f))),
        ...conditional,
        ...resume,
      ],
      ...(body ? { requestBody: body } : {}),
      // the document's default is the bearer token; the few open operations (login, refresh) say they need none
      ...(getOption(route.method, access) === Access.PUBLIC ? { security: [] } : {}),
      responses: {
        "200": successResponse(route, b),
        ...(conditional.length ? { "304": { description: "Not Modified: the content still has the ETag sent in If-None-Match" } } : {}),
        ...errors,
      },
    };
    (paths[route.documentedPath] ??= {})[route.httpMethod.toLowerCase()] = op;
  }
  const codes = Object.values(Code)
    .filter((c): c is Code => typeof c === "number")
    .map(codeName);
  return {
    openapi: "3.1.0",
    info: {
      ...info,
      description:
        "Every operation is also served as Connect, gRPC and gRPC-Web (see each operation's RPC name). Every failure answers" +
        ` \`{"code", "message"}\` (${ERROR_SCHEMA}) with the status of its code.`,
    },
    // relative to where the document is served: every gateway answers the same API
    servers: [{ url: "/" }],
    tags: [...services.values()].map((s) => ({ name: s.name, ...(docs[s.typeName] ? { description: docs[s.typeName] } : {}) })),
    // With security on (the default) every operation but login and refresh needs an access token (contract §7).
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", bearerFormat: "JWT", description: "the accessToken of POST /v1/authenticate/{username}/login (none when gov.security.enabled=false)" },
      },
      schemas: {
        [ERROR_SCHEMA]: {
          type: "object",
          description: "Every failure, on every listener: a Connect code and a message that says what went wrong and how to fix it.",
          required: ["code", "message"],
          properties: {
            code: { type: "string", enum: codes, example: "not_found" },
            message: { type: "string", example: 'config "app.yaml" not found in namespace "{dev}"' },
          },
        },
        ...b.components,
      },
      responses: Object.fromEntries(
        ERROR_RESPONSES.map(([, name, description]) => [name, { description, content: { "application/json": { schema: { $ref: `#/components/schemas/${ERROR_SCHEMA}` } } } }]),
      ),
    },
  };
}
