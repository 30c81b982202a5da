import { Code, ConnectError } from "@connectrpc/connect";
import { ChooseInstanceResponseSchema, RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { SecurityService } from "@gov/api/gen/gov/security/v1/security_pb";
import type { FastifyRequest } from "fastify";
import { describe, expect, it } from "vitest";
import { buildRequest } from "../src/transcode/request.js";
import { restRoutesOf, type RestRoute } from "../src/transcode/rest-routes.js";

/**
 * A rule's `body: "<field>"` naming a map or message field: the body is that field's JSON, bare. The transcoder knows
 * no service, so it is tested here on a rule of each kind: the registry's metadata PUT (a map<string, string>) and,
 * for a message field, a route built the same way around a message with one (no proto rule of ours has one yet).
 */
const request = (body: string | undefined): FastifyRequest =>
  ({ body: body === undefined ? undefined : Buffer.from(body), headers: { "content-type": "application/json" }, query: {}, params: {} }) as unknown as FastifyRequest;

const refusal = (route: RestRoute, body: string | undefined) => {
  try {
    buildRequest(route, request(body));
  } catch (err) {
    return { code: (err as ConnectError).code, message: (err as ConnectError).rawMessage };
  }
  throw new Error(`accepted ${body}`);
};

describe("a body rule naming a map field", () => {
  const route = restRoutesOf([RegistryService]).find((r) => r.method.name === "SetInstanceMetadata")!;
  it("takes the bare map, {} included", () => {
    expect(route.body).not.toBe("*");
    const msg = buildRequest(route, request('{"zone":"a","rack":"7"}')) as unknown as { metadata: Record<string, string> };
    expect(msg.metadata).toEqual({ zone: "a", rack: "7" });
    expect((buildRequest(route, request("{}")) as unknown as { metadata: Record<string, string> }).metadata).toEqual({});
  });

  it("refuses non-string values, other JSON and no body with how to fix it", () => {
    expect(refusal(route, '{"n":1}')).toEqual({ code: Code.InvalidArgument, message: expect.stringMatching(/value of "n" is a number: metadata values are strings, so quote it/) });
    expect(refusal(route, "[1]").message).toMatch(/is an array: the body is the metadata map itself, \{"key": "value"\}/);
    expect(refusal(route, "{").message).toMatch(/not valid JSON .*send the metadata map as/);
    expect(refusal(route, undefined).message).toBe('the request body is the metadata map itself, as JSON: send {"key": "value"} ({} for none)');
  });

  it("tells a map sent wrapped in its field's name (JSON or proto) that the body is the map itself, not to quote it", () => {
    const wrapped = 'the request body is the metadata map itself, not an object holding it: send {"zone": "b"}, not {"metadata": {...}}';
    expect(refusal(route, '{"metadata":{"zone":"b"}}')).toEqual({ code: Code.InvalidArgument, message: wrapped });
    // a long map is not echoed back
    expect(refusal(route, JSON.stringify({ metadata: { zone: "b".repeat(100) } })).message).toBe(
      "the request body is the metadata map itself, not an object holding it: send the object inside, not {\"metadata\": {...}}",
    );
    // a key "metadata" with a string value is a map entry like any other
    expect((buildRequest(route, request('{"metadata":"x"}')) as unknown as { metadata: Record<string, string> }).metadata).toEqual({ metadata: "x" });
  });
});

describe("a body rule naming a list field", () => {
  const route = restRoutesOf([SecurityService]).find((r) => r.method.name === "BindRoles")!;
  it("takes the bare list; refuses other JSON and the list sent wrapped, naming it as a list", () => {
    expect(route.body).toMatchObject({ jsonName: "roleNames" });
    expect((buildRequest(route, request('["dev"]')) as unknown as { roleNames: string[] }).roleNames).toEqual(["dev"]);
    expect(refusal(route, '{"a":1}').message).toBe('the request body is an object: the body is the list of roleNames itself, ["a", "b"] ([] for none)');
    expect(refusal(route, undefined).message).toBe('the request body is the list of roleNames itself, as JSON: send ["a", "b"] ([] for none)');
    expect(refusal(route, "[1]").message).toMatch(/^the request body is not a valid list of roleNames: /);
    const wrapped = 'the request body is the list of roleNames itself, not an object holding it: send ["dev", "qa"], not {"%s": [...]}';
    expect(refusal(route, '{"roleNames":["dev","qa"]}').message).toBe(wrapped.replace("%s", "roleNames"));
    expect(refusal(route, '{"role_names":["dev","qa"]}').message).toBe(wrapped.replace("%s", "role_names"));
  });
});

describe("a body rule naming a message field", () => {
  // ChooseInstanceResponse has one message field (`instance`): the body is an Instance's JSON.
  const field = ChooseInstanceResponseSchema.fields.find((f) => f.name === "instance")!;
  const route = { ...restRoutesOf([RegistryService])[0], method: { ...restRoutesOf([RegistryService])[0].method, input: ChooseInstanceResponseSchema }, pathFields: [], body: field } as unknown as RestRoute;

  it("takes the message's JSON as the field", () => {
    const msg = buildRequest(route, request('{"host":"h","port":80,"metadata":{"a":"b"}}')) as unknown as { instance: { host: string; port: number; metadata: Record<string, string> } };
    expect([msg.instance.host, msg.instance.port, msg.instance.metadata]).toEqual(["h", 80, { a: "b" }]);
  });

  it("refuses what does not decode as that message, naming the problem", () => {
    expect(refusal(route, '{"port":"eighty"}')).toEqual({ code: Code.InvalidArgument, message: expect.stringMatching(/^the request body is not a valid instance: .*port/) });
    expect(refusal(route, '{"colour":"red"}').message).toMatch(/colour/);
    expect(refusal(route, '"text"').message).toMatch(/is a string: the body is the instance itself, a JSON object/);
  });

  it("tells a message sent wrapped in its field's name that the body is the message itself, without echoing it", () => {
    expect(refusal(route, '{"instance":{"host":"h","port":80}}').message).toBe(
      'the request body is the instance itself, not an object holding it: send the object inside, not {"instance": {...}}',
    );
  });
});
