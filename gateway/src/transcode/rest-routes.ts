import { getOption, ScalarType, type DescField, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { http } from "@gov/api";

/** One REST route derived from a `google.api.http` rule. */
export interface RestRoute {
  service: DescService;
  method: DescMethod;
  httpMethod: "GET" | "PUT" | "POST" | "DELETE" | "PATCH";
  /** The rule's template, e.g. /v1/namespaces/{namespace}/configs/{config_id} */
  template: string;
  /** The same path in Fastify syntax: /v1/namespaces/:namespace/configs/:config_id */
  fastifyPath: string;
  /**
   * The same path with its variables under their JSON names, as the seed and the OpenAPI document write it:
   * /v1/namespaces/{namespace}/configs/{configId} (a generated client's parameters are named like every other field).
   */
  documentedPath: string;
  /** Request fields bound by path variables, in template order. */
  pathFields: DescField[];
  /** "*" (the whole body), a request field (the body is that field), or undefined (no body). */
  body: "*" | DescField | undefined;
  /** The response field rendered as the whole response, or undefined for the whole message. */
  responseField: DescField | undefined;
  readOnly: boolean;
}

/** The rule's body is a string or bytes field: the request body is that field's raw content (a config's text), not JSON. */
export function takesRawContent(route: RestRoute): boolean {
  const body = route.body;
  return body !== undefined && body !== "*" && body.fieldKind === "scalar" && (body.scalar === ScalarType.STRING || body.scalar === ScalarType.BYTES);
}

/**
 * A secret (`debug_redact` in the proto: passwords, tokens) is taken from a request body only: a URL's query string ends
 * up in proxy and server logs, shell history and browser history.
 */
export const isSecret = (field: DescField): boolean => field.proto.options?.debugRedact === true;

function fieldOf(method: DescMethod, side: "input" | "output", name: string): DescField {
  const msg = method[side];
  const field = msg.fields.find((f) => f.name === name);
  if (!field) throw new Error(`${method.parent.typeName}.${method.name}: http rule names "${name}", which ${msg.typeName} does not have`);
  return field;
}

/**
 * Every RPC of the given services that carries a `google.api.http` rule, as a REST route. The proto is the single
 * source of truth: adding an annotated RPC adds its REST route, its OpenAPI entry and its docs.
 */
export function restRoutesOf(services: DescService[]): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const service of services) {
    for (const method of service.methods) {
      const rule = getOption(method, http);
      if (!rule || rule.pattern.case === undefined || rule.pattern.case === "custom") continue;
      const template = rule.pattern.value;
      const pathFields: DescField[] = [];
      const fastifyPath = template.replace(/\{([a-z_][a-z0-9_]*)\}/g, (_, name: string) => {
        pathFields.push(fieldOf(method, "input", name));
        return `:${name}`;
      });
      let variable = 0;
      routes.push({
        service,
        method,
        httpMethod: rule.pattern.case.toUpperCase() as RestRoute["httpMethod"],
        template,
        fastifyPath,
        documentedPath: template.replace(/\{[a-z_][a-z0-9_]*\}/g, () => `{${pathFields[variable++].jsonName}}`),
        pathFields,
        body: rule.body === "*" ? "*" : rule.body ? fieldOf(method, "input", rule.body) : undefined,
        responseField: rule.responseBody ? fieldOf(method, "output", rule.responseBody) : undefined,
        readOnly: method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS,
      });
    }
  }
  return routes;
}
