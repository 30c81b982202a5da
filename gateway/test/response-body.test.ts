import { create, ScalarType, toJson, type DescField, type Message } from "@bufbuild/protobuf";
import { ConfigService } from "@gov/api/gen/gov/config/v1/config_pb";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { SecurityService } from "@gov/api/gen/gov/security/v1/security_pb";
import { NamespaceService } from "@gov/api/gen/gov/stats/v1/namespace_pb";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import { describe, expect, it } from "vitest";
import { responseBody } from "../src/transcode/response.js";
import { restRoutesOf } from "../src/transcode/rest-routes.js";

/**
 * A rule's `response_body` naming a scalar field (`true`, `"v3"`, `["a.yaml"]`) is answered without converting the
 * whole message to JSON first. Whatever the shortcut, the text must be what protobuf JSON says for that field.
 */
const routes = restRoutesOf([ConfigService, RegistryService, SecurityService, NamespaceService, StatsService]);
const generalWay = (route: (typeof routes)[number], msg: Message) =>
  JSON.stringify((toJson(route.method.output, msg, { alwaysEmitImplicit: true }) as Record<string, unknown>)[route.responseField!.jsonName] ?? null);

const STRINGS = ["", "plain", 'quote " and \\ backslash', "line\nbreak\ttab\u0000nul", "{dev} ü 漢字 😀", "lone \ud800 surrogate", "</script>"];
const samples = (field: DescField): unknown[] => {
  const one = field.scalar === ScalarType.BOOL ? [true, false] : field.scalar === ScalarType.STRING ? STRINGS : [];
  return field.fieldKind === "list" ? [[], one, one.slice(0, 1)] : one;
};

describe("responseBody of a scalar response field", () => {
  const scalarRoutes = routes.filter((r) => r.responseField && (r.responseField.fieldKind === "scalar" || (r.responseField.fieldKind === "list" && r.responseField.listKind === "scalar")));

  it("covers the write answers and id lists of every service", () => {
    const names = scalarRoutes.map((r) => r.method.name);
    expect(names).toEqual(expect.arrayContaining(["SetConfig", "ListConfigs", "RegisterInstance", "RenewInstance", "ListServices", "LockUser", "GetCurrentNamespace", "ListNamespaces"]));
  });

  it("is the protobuf JSON of the field, for every value tried, set or left unset", () => {
    for (const route of scalarRoutes) {
      const field = route.responseField!;
      const unset = create(route.method.output);
      expect(responseBody(route, unset), `${route.method.name} unset`).toBe(generalWay(route, unset));
      for (const value of samples(field)) {
        const msg = create(route.method.output, { [field.localName]: value } as never);
        expect(responseBody(route, msg), `${route.method.name} ${JSON.stringify(value)}`).toBe(generalWay(route, msg));
      }
    }
  });
});
