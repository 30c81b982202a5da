import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Validator } from "@seriousme/openapi-schema-validator";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { createConfigModule, createMemoryConfigStore } from "@gov/config-service";
import { restGateway, restRoutesOf } from "@gov/gateway";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRegistryModule } from "../src/module.js";
import { registrySettings } from "../src/settings.js";
import { createMemoryRegistryStore } from "../src/store/memory-registry-store.js";
import { testSources } from "./harness.js";

// The seed's service endpoints, exactly (method, path), plus renew and the two watches.
const SEED = [
  ["GET", "/v1/namespaces/{namespace}/services"],
  ["PUT", "/v1/namespaces/{namespace}/services/{serviceId}"],
  ["DELETE", "/v1/namespaces/{namespace}/services/{serviceId}"],
  ["GET", "/v1/namespaces/{namespace}/services/{serviceId}/instances"],
  ["PUT", "/v1/namespaces/{namespace}/services/{serviceId}/instances"],
  ["DELETE", "/v1/namespaces/{namespace}/services/{serviceId}/instances/{instanceId}"],
  ["PUT", "/v1/namespaces/{namespace}/services/{serviceId}/instances/{instanceId}/metadata"],
  ["GET", "/v1/namespaces/{namespace}/services/stats"],
  ["GET", "/v1/namespaces/{namespace}/services/{serviceId}/lb"],
  ["PUT", "/v1/namespaces/{namespace}/services/{serviceId}/instances/{instanceId}/renew"],
  ["GET", "/v1/namespaces/{namespace}/services/{serviceId}/instances/watch"],
  ["GET", "/v1/namespaces/{namespace}/services/watch"],
];

type Schema = Record<string, unknown>;
type Operation = { operationId: string; summary: string; requestBody?: { description?: string; content: Record<string, { schema: Schema }> }; parameters: { name: string; description?: string }[]; responses: Record<string, { content?: Record<string, { schema: Schema }> }> };
type Doc = { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, { required?: string[]; properties: Record<string, Schema> }> } };

describe("the registry's REST surface derives from the proto, in the all-in-one process's OpenAPI document", () => {
  let proc: BuiltProcess;
  let doc: Doc;
  beforeAll(async () => {
    proc = await buildProcess({
      name: "test-openapi",
      modules: [createConfigModule({ store: createMemoryConfigStore({ maxVersions: 10 }) }), createRegistryModule({ store: createMemoryRegistryStore() })],
      gateway: restGateway,
      sources: testSources(),
      logger: createLogger("test", "silent"),
    });
    const r = await proc.http.inject({ method: "GET", url: "/openapi.json" });
    expect(r.statusCode).toBe(200);
    doc = r.json();
  });
  afterAll(async () => proc?.shutdown());

  it("every seed service endpoint is an annotated RPC; reads (and only reads) are NO_SIDE_EFFECTS", () => {
    const routes = restRoutesOf([RegistryService]);
    expect(routes.map((r) => [r.httpMethod, r.documentedPath]).sort()).toEqual([...SEED].sort());
    for (const r of routes) expect([r.method.name, r.readOnly]).toEqual([r.method.name, r.httpMethod === "GET"]);
  });

  it("is a valid OpenAPI 3.1 document with every registry route, documented from the proto comments", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc) as never);
    expect(result.errors ?? []).toEqual([]);
    for (const [method, path] of SEED) {
      const op = doc.paths[path]?.[method.toLowerCase()];
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op.summary, op.operationId).not.toBe(op.operationId.split("_")[1]);
      expect(op.parameters.find((p) => p.name === "namespace")?.description, op.operationId).toMatch(/hash tag.*\{dev\}/s);
    }
    const json = (path: string, method: string) => doc.paths[path][method].responses["200"].content!["application/json"].schema;
    expect(json("/v1/namespaces/{namespace}/services", "get")).toEqual({ type: "array", items: { type: "string" } });
    expect(json("/v1/namespaces/{namespace}/services/{serviceId}/instances", "put")).toEqual({ type: "boolean" });
    expect(json("/v1/namespaces/{namespace}/services/{serviceId}/instances/{instanceId}", "delete")).toEqual({ type: "boolean" });
    expect(json("/v1/namespaces/{namespace}/services/{serviceId}/lb", "get")).toEqual({ $ref: "#/components/schemas/Instance" });
    // the events of both registry watches carry a hash, the `id:` a client sends back as Last-Event-ID
    for (const path of ["/v1/namespaces/{namespace}/services/{serviceId}/instances/watch", "/v1/namespaces/{namespace}/services/watch"]) {
      const watch = doc.paths[path].get as unknown as { responses: Record<string, { description: string }>; parameters: { name: string }[] };
      expect(watch.responses["200"].description, path).toMatch(/`id:` the `hash` it carries/);
      expect(watch.parameters.map((p) => p.name), path).toContain("Last-Event-ID");
    }
    const lb = (doc as unknown as { paths: Record<string, Record<string, { responses: Record<string, { description: string }> }>> }).paths["/v1/namespaces/{namespace}/services/{serviceId}/lb"].get;
    expect(lb.responses["200"].description).not.toMatch(/after the change/);
    expect(Object.keys(doc.components.schemas.Instance.properties)).toEqual(
      ["instanceId", "serviceId", "schema", "host", "port", "weight", "isEphemeral", "ttlAt", "metadata", "isExpired"],
    );
    // What the proto marks REQUIRED (google.api.field_behavior) is required in the body: a generated client's type says so
    const register = doc.paths["/v1/namespaces/{namespace}/services/{serviceId}/instances"].put.requestBody;
    expect((register!.content["application/json"].schema as { required?: string[] }).required).toEqual(["schema", "host", "port"]);
    // The metadata PUT's body is the bare map, as JSON.
    const metadata = doc.paths["/v1/namespaces/{namespace}/services/{serviceId}/instances/{instanceId}/metadata"].put.requestBody;
    expect(Object.keys(metadata!.content)).toEqual(["application/json"]);
    expect(metadata!.content["application/json"].schema).toMatchObject({ type: "object", additionalProperties: { type: "string" } });
    expect(metadata!.description).toMatch(/^The metadata itself, as JSON/);
    const instanceId = doc.paths["/v1/namespaces/{namespace}/services/{serviceId}/instances/{instanceId}"].delete.parameters.find((p) => p.name === "instanceId");
    expect(instanceId?.description).toContain("%23");
  });

  it("every registry setting has a row in the README's settings table", () => {
    const readme = readFileSync(join(dirname(fileURLToPath(import.meta.url)), "../../../README.md"), "utf8");
    for (const def of Object.values(registrySettings)) expect(readme, def.name).toContain(`| \`${def.name}\``);
  });
});
