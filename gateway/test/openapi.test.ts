import { ConfigService } from "@gov/api";
import { createMemoryConfigStore } from "@gov/config-service";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { restRoutesOf } from "../src/index.js";
import { createTestGateway, type TestGateway } from "./harness.js";

// The seed's config endpoints, exactly (method, path).
const SEED = [
  ["GET", "/v1/namespaces/{namespace}/configs"],
  ["PUT", "/v1/namespaces/{namespace}/configs/{config_id}"],
  ["DELETE", "/v1/namespaces/{namespace}/configs/{config_id}"],
  ["GET", "/v1/namespaces/{namespace}/configs/{config_id}"],
  ["PUT", "/v1/namespaces/{namespace}/configs/{config_id}/to/{target_version}"],
  ["GET", "/v1/namespaces/{namespace}/configs/{config_id}/versions"],
  ["GET", "/v1/namespaces/{namespace}/configs/{config_id}/versions/{version}"],
  ["POST", "/v1/namespaces/{namespace}/configs"],
  ["GET", "/v1/namespaces/{namespace}/configs/export"],
];

describe("the REST surface derives from the proto", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await createTestGateway(createMemoryConfigStore({ maxVersions: 10 }));
  });
  afterAll(async () => gw?.close());

  it("every seed config endpoint is an annotated RPC; reads are NO_SIDE_EFFECTS", () => {
    const routes = restRoutesOf([ConfigService]);
    const pairs = routes.map((r) => [r.httpMethod, r.template]);
    for (const e of SEED) expect(pairs).toContainEqual(e);
    for (const r of routes) expect([r.method.name, r.readOnly]).toEqual([r.method.name, r.httpMethod === "GET"]);
  });

  it("/openapi.json describes every route with its bare response shape and the error shape", async () => {
    const r = await gw.app.inject({ method: "GET", url: "/openapi.json" });
    expect(r.statusCode).toBe(200);
    const doc = r.json();
    expect(doc.openapi).toBe("3.1.0");
    for (const [method, path] of SEED) expect(doc.paths[path]?.[method.toLowerCase()], `${method} ${path}`).toBeDefined();
    const put = doc.paths["/v1/namespaces/{namespace}/configs/{config_id}"].put;
    expect(put.responses["200"].content["application/json"].schema).toEqual({ type: "boolean" });
    expect(put.requestBody.content["text/plain"]).toBeDefined();
    const list = doc.paths["/v1/namespaces/{namespace}/configs"].get;
    expect(list.responses["200"].content["application/json"].schema).toEqual({ type: "array", items: { type: "string" } });
    const imp = doc.paths["/v1/namespaces/{namespace}/configs"].post;
    expect(imp.requestBody.content["multipart/form-data"].schema.properties.importZip).toEqual({ type: "string", format: "binary" });
    expect(doc.paths["/v1/namespaces/{namespace}/configs/export"].get.responses["200"].content["application/octet-stream"]).toBeDefined();
    expect(doc.components.schemas["gov.config.v1.Config"].properties.createTime).toEqual({ type: "string", format: "date-time" });
    expect(doc.components.schemas.Error.required).toEqual(["code", "message"]);
  });

  it("/docs renders the API reference", async () => {
    const r = await gw.app.inject({ method: "GET", url: "/docs/" });
    expect(r.statusCode).toBe(200);
    expect(r.body).toMatch(/swagger/i);
    const spec = await gw.app.inject({ method: "GET", url: "/docs/json" });
    expect(spec.json().paths["/v1/namespaces/{namespace}/configs/export"]).toBeDefined();
  });
});
