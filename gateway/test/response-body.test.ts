import { create, ScalarType, toJson, type DescField, type Message } from "@bufbuild/protobuf";
import { ConfigService } from "@gov/api/gen/gov/config/v1/config_pb";
import { InstanceSchema, RegistryService, WatchInstancesResponseSchema, type WatchInstancesResponse } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { SecurityService } from "@gov/api/gen/gov/security/v1/security_pb";
import { NamespaceService } from "@gov/api/gen/gov/stats/v1/namespace_pb";
import { StatsService } from "@gov/api/gen/gov/stats/v1/stats_pb";
import { describe, expect, it } from "vitest";
import { responseBody, wholeMessageJson } from "../src/transcode/response.js";
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

describe("wholeMessageJson (SSE events, whole-message answers)", () => {
  const instance = (port: number) =>
    create(InstanceSchema, { instanceId: `s@http#h#${port}`, serviceId: "s", schema: "http", host: "h", port, weight: 1, isEphemeral: true, ttlAt: { seconds: 1_800_000_000n, nanos: 0 }, metadata: { zone: "a" } });
  const general = (msg: WatchInstancesResponse) => toJson(WatchInstancesResponseSchema, msg, { alwaysEmitImplicit: true });

  it("is the protobuf JSON of the message, with lists or without, head fields set or not", () => {
    const messages = [
      create(WatchInstancesResponseSchema, { op: "current", serviceId: "s", instances: [instance(1), instance(2)] }),
      create(WatchInstancesResponseSchema, { instances: [instance(3)] }), // nothing but the list set
      create(WatchInstancesResponseSchema, { op: "current", serviceId: "s" }), // an empty list
      create(WatchInstancesResponseSchema, { op: "register", serviceId: "s", instanceId: "s@http#h#4", instance: instance(4) }),
      create(WatchInstancesResponseSchema),
    ];
    for (const msg of messages) expect(JSON.parse(wholeMessageJson(WatchInstancesResponseSchema, msg))).toEqual(general(msg));
  });

  it("serializes each message of a list once: the next event holding the same instances reuses their text", () => {
    const shared = [instance(1), instance(2)];
    wholeMessageJson(WatchInstancesResponseSchema, create(WatchInstancesResponseSchema, { op: "current", instances: shared }));
    // records, and so their messages, are immutable: a change made anyway shows that the text was not made again
    shared[0].port = 9;
    const again = JSON.parse(wholeMessageJson(WatchInstancesResponseSchema, create(WatchInstancesResponseSchema, { op: "resync", instances: shared })));
    expect(again.instances.map((i: { port: number }) => i.port)).toEqual([1, 2]);
    expect(again.op).toBe("resync");
  });
});
