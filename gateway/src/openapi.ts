import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { isHttpBody } from "./transcode/response.js";
import type { RestRoute } from "./transcode/rest-routes.js";

type Schema = Record<string, unknown>;

const ERROR_REF = { $ref: "#/components/schemas/Error" };

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

/** JSON schemas of proto messages, as the proto JSON mapping renders them, collected into components. */
class SchemaBuilder {
  readonly components: Record<string, Schema> = {};

  message(desc: DescMessage): Schema {
    if (desc.typeName === "google.protobuf.Timestamp") return { type: "string", format: "date-time" };
    if (desc.typeName === "google.protobuf.Duration") return { type: "string", example: "60s" };
    const name = desc.typeName;
    if (!this.components[name]) {
      this.components[name] = {}; // placeholder first: messages may refer to themselves
      const properties: Record<string, Schema> = {};
      for (const f of desc.fields) properties[f.jsonName] = this.field(f);
      this.components[name] = { type: "object", properties };
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
        return { type: "array", items: f.listKind === "scalar" ? scalarSchema(f.scalar) : f.listKind === "enum" ? { type: "string" } : this.message(f.message) };
      case "map":
        return { type: "object", additionalProperties: f.mapKind === "scalar" ? scalarSchema(f.scalar) : f.mapKind === "enum" ? { type: "string" } : this.message(f.message) };
    }
  }
}

function requestBody(route: RestRoute, b: SchemaBuilder): Schema | undefined {
  if (!route.body) return undefined;
  if (route.body !== "*") {
    return { required: true, description: `the ${route.body.jsonName}, as the raw body (any content type)`, content: { "text/plain": { schema: b.field(route.body) } } };
  }
  const bound = new Set(route.pathFields);
  const properties: Record<string, Schema> = {};
  const hasBytes = route.method.input.fields.some((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES);
  for (const f of route.method.input.fields) {
    if (bound.has(f)) continue;
    properties[f.jsonName] = f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES ? { type: "string", format: "binary" } : b.field(f);
  }
  const media = hasBytes ? "multipart/form-data" : "application/json";
  return { required: true, content: { [media]: { schema: { type: "object", properties } } } };
}

function successResponse(route: RestRoute, b: SchemaBuilder): Schema {
  if (route.method.methodKind === "server_streaming") {
    if (isHttpBody(route.responseField)) return { description: "the file, streamed", content: { "application/octet-stream": { schema: { type: "string", format: "binary" } } } };
    return { description: `Server-Sent Events; each event's data is a ${route.method.output.name}`, content: { "text/event-stream": { schema: b.message(route.method.output) } } };
  }
  const schema = route.responseField ? b.field(route.responseField) : b.message(route.method.output);
  return { description: "OK", content: { "application/json": { schema } } };
}

/** The OpenAPI 3.1 document of the REST API, derived from the same proto annotations that drive the routes. */
export function buildOpenApi(routes: RestRoute[], info: { title: string; version: string }): Schema {
  const b = new SchemaBuilder();
  const paths: Record<string, Record<string, Schema>> = {};
  for (const route of routes) {
    const bound = new Set([...route.pathFields, ...(route.body && route.body !== "*" ? [route.body] : [])]);
    const query =
      route.body === "*"
        ? route.method.input.fields.filter((f) => !bound.has(f) && f.fieldKind === "scalar" && f.scalar !== ScalarType.BYTES)
        : route.method.input.fields.filter((f) => !bound.has(f) && f.fieldKind === "scalar");
    const op: Schema = {
      operationId: `${route.service.name}.${route.method.name}`,
      tags: [route.service.name],
      summary: route.method.name,
      description: `Connect/gRPC: ${route.service.typeName}/${route.method.name}`,
      parameters: [
        ...route.pathFields.map((f) => ({ name: f.name, in: "path", required: true, schema: b.field(f) })),
        ...query.map((f) => ({ name: f.jsonName, in: "query", required: false, schema: b.field(f) })),
      ],
      requestBody: requestBody(route, b),
      responses: {
        "200": successResponse(route, b),
        default: { description: "an error: {code, message}", content: { "application/json": { schema: ERROR_REF } } },
      },
    };
    (paths[route.template] ??= {})[route.httpMethod.toLowerCase()] = op;
  }
  return {
    openapi: "3.1.0",
    info,
    paths,
    components: {
      schemas: {
        Error: {
          type: "object",
          required: ["code", "message"],
          properties: { code: { type: "string", example: "not_found" }, message: { type: "string" } },
        },
        ...b.components,
      },
    },
  };
}
