import { Code, ConnectError } from "@connectrpc/connect";
import { ChooseInstanceResponseSchema, RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
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
    expect(refusal(route, "[1]").message).toMatch(/is an array: the body is the metadata itself/);
    expect(refusal(route, "{").message).toMatch(/not valid JSON/);
    expect(refusal(route, undefined).message).toMatch(/send \{"key": "value"\} \(\{\} for none\)/);
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
});
