import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { Validator } from "@seriousme/openapi-schema-validator";
import { ConfigService } from "@gov/api";
import { createMemoryConfigStore } from "@gov/config-service";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { restRoutesOf } from "../src/index.js";
import { createTestGateway, type TestGateway } from "./harness.js";

// The seed's config endpoints, exactly (method, path).
const SEED = [
  ["GET", "/v1/namespaces/{namespace}/configs"],
  ["PUT", "/v1/namespaces/{namespace}/configs/{configId}"],
  ["DELETE", "/v1/namespaces/{namespace}/configs/{configId}"],
  ["GET", "/v1/namespaces/{namespace}/configs/{configId}"],
  ["PUT", "/v1/namespaces/{namespace}/configs/{configId}/to/{targetVersion}"],
  ["GET", "/v1/namespaces/{namespace}/configs/{configId}/versions"],
  ["GET", "/v1/namespaces/{namespace}/configs/{configId}/versions/{version}"],
  ["POST", "/v1/namespaces/{namespace}/configs"],
  ["GET", "/v1/namespaces/{namespace}/configs/export"],
];

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, { required?: string[]; properties: Record<string, unknown>; description?: string }>; responses: Record<string, unknown> };
  tags: { name: string; description?: string }[];
};
type Operation = {
  operationId: string;
  summary: string;
  description: string;
  parameters: { name: string; in: string; description?: string }[];
  requestBody?: { content: Record<string, unknown>; description?: string };
  responses: Record<string, { $ref?: string; description?: string; content?: Record<string, { schema: unknown }>; headers?: Record<string, unknown> }>;
};
const operations = (doc: Doc) => Object.values(doc.paths).flatMap((p) => Object.values(p));
const CONFIG = "/v1/namespaces/{namespace}/configs/{configId}";

describe("the REST surface derives from the proto", () => {
  let gw: TestGateway;
  let doc: Doc;
  beforeAll(async () => {
    gw = await createTestGateway(createMemoryConfigStore({ maxVersions: 10 }));
    const r = await gw.app.inject({ method: "GET", url: "/openapi.json" });
    expect(r.statusCode).toBe(200);
    doc = r.json();
  });
  afterAll(async () => gw?.close());

  it("every seed config endpoint is an annotated RPC; reads are NO_SIDE_EFFECTS", () => {
    const routes = restRoutesOf([ConfigService]);
    const pairs = routes.map((r) => [r.httpMethod, r.documentedPath]);
    for (const e of SEED) expect(pairs).toContainEqual(e);
    for (const r of routes) expect([r.method.name, r.readOnly]).toEqual([r.method.name, r.httpMethod === "GET"]);
  });

  it("is a valid OpenAPI 3.1 document (checked by an OpenAPI schema validator, $refs resolved)", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc) as never); // it resolves $refs in place
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    // every $ref points at something that exists (the validator checks the shape, not the targets)
    expect(() => validator.resolveRefs()).not.toThrow();
    const refs = JSON.stringify(doc).match(/"#\/components\/[^"]+"/g) ?? [];
    for (const ref of new Set(refs)) {
      const [, , kind, name] = JSON.parse(ref).split("/");
      expect((doc.components as Record<string, Record<string, unknown>>)[kind][name], ref).toBeDefined();
    }
  });

  it("describes every route with its bare response shape", () => {
    expect(doc.openapi).toBe("3.1.0");
    for (const [method, path] of SEED) expect(doc.paths[path]?.[method.toLowerCase()], `${method} ${path}`).toBeDefined();
    const put = doc.paths[CONFIG].put;
    expect(put.responses["200"].content!["application/json"].schema).toEqual({ type: "boolean" });
    const list = doc.paths["/v1/namespaces/{namespace}/configs"].get;
    expect(list.responses["200"].content!["application/json"].schema).toEqual({ type: "array", items: { type: "string" } });
    expect(doc.paths[CONFIG].get.responses["200"].content!["application/json"].schema).toEqual({ $ref: "#/components/schemas/Config" });
  });

  it("gives every RPC a unique, stable operationId and the proto comments as summary and description", () => {
    const ids = operations(doc).map((op) => op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z][A-Za-z0-9_]*$/);
    const get = doc.paths[CONFIG].get;
    expect(get.operationId).toBe("ConfigService_GetConfig");
    expect(get.summary).toBe("Reads the current version of a config.");
    expect(get.description).toContain("not_found");
    expect(get.description).toContain("gov.config.v1.ConfigService/GetConfig");
    expect(doc.paths[CONFIG].put.summary).toBe("Creates or updates a config.");
    // every operation has a written summary, not just its method name
    for (const op of operations(doc)) expect(op.summary, op.operationId).not.toBe(op.operationId.split("_")[1]);
    expect(doc.tags).toContainEqual(expect.objectContaining({ name: "ConfigService", description: expect.stringContaining("hash tag") }));
    expect(doc.components.schemas.Config.properties.hash).toMatchObject({ description: "SHA-256 hex of data." });
  });

  it("component names have no dots, and the error schema does not shadow a global", () => {
    for (const name of Object.keys(doc.components.schemas)) expect(name).toMatch(/^[A-Za-z][A-Za-z0-9]*$/);
    expect(doc.components.schemas.Error).toBeUndefined();
    expect(doc.components.schemas.GovError.required).toEqual(["code", "message"]);
  });

  it("marks as required what answers always carry (scalars and lists), not message fields that may be absent", () => {
    const { Config, ConfigVersion, ImportConfigsResponse, WatchConfigResponse } = doc.components.schemas;
    expect(Config.required).toEqual(["configId", "data", "hash", "version"]);
    expect(ConfigVersion.required).toEqual(["configId", "version", "op"]);
    expect(ImportConfigsResponse.required).toEqual(["total", "succeeded", "results"]);
    expect(WatchConfigResponse.required).toEqual(["op", "configId"]); // config is absent after a remove
  });

  it("lists every error status with the error schema and its code enum", () => {
    const codes = (doc.components.schemas.GovError.properties.code as { enum: string[] }).enum;
    expect(codes).toEqual(expect.arrayContaining(["invalid_argument", "not_found", "failed_precondition", "unavailable", "unauthenticated", "permission_denied", "already_exists", "resource_exhausted", "deadline_exceeded", "internal"]));
    expect(codes).toHaveLength(16);
    for (const op of operations(doc)) {
      expect(op.responses["413"] !== undefined, `${op.operationId} 413`).toBe(op.requestBody !== undefined);
      expect(op.responses["415"] !== undefined, `${op.operationId} 415`).toBe(op.requestBody !== undefined);
      for (const status of ["400", "401", "403", "404", "405", "408", "409", "412", "429", "500", "503", "504"]) {
        const ref = op.responses[status]?.$ref;
        expect(ref, `${op.operationId} ${status}`).toMatch(/^#\/components\/responses\//);
        const response = doc.components.responses[ref!.split("/").pop()!] as { content: Record<string, { schema: unknown }> };
        expect(response.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/GovError" });
      }
    }
  });

  it("describes the namespace hash-tag rule and the percent-encoding of '/' on the path parameters", () => {
    for (const op of operations(doc)) {
      const ns = op.parameters.find((p) => p.name === "namespace");
      expect(ns?.description, op.operationId).toMatch(/hash tag.*\{dev\}/s);
      const id = op.parameters.find((p) => p.name === "configId");
      if (id) expect(id.description, op.operationId).toContain("%2F");
    }
  });

  it("uses the media types the server really sends and takes", async () => {
    const exp = doc.paths["/v1/namespaces/{namespace}/configs/export"].get.responses["200"];
    expect(Object.keys(exp.content!)).toEqual(["application/zip"]);
    expect(exp.headers?.["Content-Disposition"]).toBeDefined();
    const served = await gw.app.inject({ method: "GET", url: "/v1/namespaces/%7Boa%7D/configs/export" });
    expect(served.headers["content-type"]).toBe("application/zip");

    const body = doc.paths[CONFIG].put.requestBody!;
    expect(Object.keys(body.content)).toEqual(["text/plain", "application/json"]);
    expect(body.description).toMatch(/JSON string is unwrapped/);
    const imp = doc.paths["/v1/namespaces/{namespace}/configs"].post.requestBody!.content["multipart/form-data"] as { schema: { properties: Record<string, unknown>; required: string[] } };
    expect(imp.schema.properties.importZip).toMatchObject({ type: "string", format: "binary" });
    expect(imp.schema.required).toEqual(["importZip"]);
    // or JSON with the archive in base64, which the server takes too (its 415 for a raw body says so)
    const impJson = doc.paths["/v1/namespaces/{namespace}/configs"].post.requestBody!.content["application/json"] as { schema: { properties: Record<string, unknown>; required: string[] } };
    expect(impJson.schema.properties.importZip).toMatchObject({ type: "string", format: "byte" });
    expect(impJson.schema.required).toEqual(["importZip"]);
    const watch = doc.paths[`${CONFIG}/watch`].get;
    expect(Object.keys(watch.responses["200"].content!)).toEqual(["text/event-stream"]);
    expect(watch.parameters.map((p) => p.name)).toContain("Last-Event-ID");
    // GET config answers with an ETag; If-None-Match and 304 are described
    const get = doc.paths[CONFIG].get;
    expect(get.responses["200"].headers?.ETag).toBeDefined();
    expect(get.responses["304"]).toBeDefined();
    expect(get.parameters.map((p) => p.name)).toContain("If-None-Match");
    // an answer is described by its own field's comment, never by a same-named field of another message (the watch
    // event's "config after the change; absent when the config does not exist" contradicted the GET's 404)
    expect(get.responses["200"].description ?? "").not.toMatch(/after the change|does not exist/);
    expect(watch.responses["200"].description).toMatch(/`id:` the `hash` it carries/);
  });

  it("the documented PUT bodies behave as described: text stored as is, a JSON string unwrapped", async () => {
    const url = "/v1/namespaces/%7Boa%7D/configs/body.txt";
    const read = async () => (await gw.app.inject({ method: "GET", url })).json().data;
    await gw.app.inject({ method: "PUT", url, headers: { "content-type": "text/plain" }, payload: '"quoted"' });
    expect(await read()).toBe('"quoted"');
    await gw.app.inject({ method: "PUT", url, headers: { "content-type": "application/json" }, payload: JSON.stringify("port: 8080\n") });
    expect(await read()).toBe("port: 8080\n");
  });

  it("is sent compressed to clients that accept it (br, gzip), the same document", async () => {
    for (const [encoding, decode] of [["br", brotliDecompressSync], ["gzip", gunzipSync]] as const) {
      const r = await gw.app.inject({ method: "GET", url: "/openapi.json", headers: { "accept-encoding": encoding } });
      expect([r.statusCode, r.headers["content-encoding"], r.headers.vary]).toEqual([200, encoding, "Accept-Encoding"]);
      expect(r.rawPayload.length).toBeLessThan(JSON.stringify(doc).length / 4);
      expect(JSON.parse(decode(r.rawPayload).toString())).toEqual(doc);
    }
  });

  it("/docs renders the API reference", async () => {
    const r = await gw.app.inject({ method: "GET", url: "/docs/" });
    expect(r.statusCode).toBe(200);
    expect(r.body).toMatch(/swagger/i);
    const spec = await gw.app.inject({ method: "GET", url: "/docs/json" });
    expect(spec.json().paths["/v1/namespaces/{namespace}/configs/export"]).toBeDefined();
    // rendering the docs leaves /openapi.json as it was ($refs kept, for client generators)
    const again = (await gw.app.inject({ method: "GET", url: "/openapi.json" })).json();
    expect(again.paths["/v1/namespaces/{namespace}/configs/{configId}"].get.responses["404"]).toEqual({ $ref: "#/components/responses/NotFound" });
  });
});
