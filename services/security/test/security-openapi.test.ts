import { Validator } from "@seriousme/openapi-schema-validator";
import { SecurityService } from "@gov/api/gen/gov/security/v1/security_pb";
import { restRoutesOf } from "@gov/gateway";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT_PASSWORD, startSecure, type SecureProcess } from "./harness.js";

// The seed's auth, user, role and audit endpoints, exactly (method, path).
const SEED = [
  ["POST", "/v1/authenticate/{username}/login"],
  ["POST", "/v1/authenticate/{username}/refresh"],
  ["GET", "/v1/users"],
  ["POST", "/v1/users/{username}"],
  ["DELETE", "/v1/users/{username}"],
  ["PATCH", "/v1/users/{username}/password"],
  ["PATCH", "/v1/users/{username}/role"],
  ["PUT", "/v1/users/{username}/lock"],
  ["DELETE", "/v1/users/{username}/unlock"],
  ["GET", "/v1/roles"],
  ["GET", "/v1/roles/{roleName}/bind"],
  ["PUT", "/v1/roles/{roleName}"],
  ["DELETE", "/v1/roles/{roleName}"],
  ["GET", "/v1/audit-log"],
  ["GET", "/v1/audit-log/export"],
];

describe("the security service's REST surface derives from the proto", () => {
  let p: SecureProcess;
  let doc: { paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Record<string, unknown> }> } }>> };
  beforeAll(async () => {
    p = await startSecure({ name: "embedded" });
    const res = await fetch(`${p.url}/openapi.json`); // open: the API's description is no secret
    expect(res.status).toBe(200);
    doc = (await res.json()) as typeof doc;
  });
  afterAll(() => p?.close());

  it("every seed endpoint is an annotated RPC; reads (and only reads) are NO_SIDE_EFFECTS", () => {
    const routes = restRoutesOf([SecurityService]);
    expect(routes.map((r) => [r.httpMethod, r.documentedPath]).sort()).toEqual([...SEED].sort());
    for (const r of routes) expect([r.method.name, r.readOnly]).toEqual([r.method.name, r.httpMethod === "GET"]);
  });

  it("is a valid OpenAPI 3.1 document with every route; the role list body is a JSON array of names", async () => {
    const result = await new Validator().validate(structuredClone(doc) as never);
    expect(result.errors ?? []).toEqual([]);
    for (const [method, path] of SEED) expect(doc.paths[path]?.[method.toLowerCase()], `${method} ${path}`).toBeDefined();
    const role = (doc.paths["/v1/users/{username}/role"] ?? {}).patch;
    expect(role?.requestBody?.content["application/json"].schema).toMatchObject({ type: "array", items: { type: "string" } });
    // what the proto marks REQUIRED (google.api.field_behavior) is required in the bodies
    const required = (path: string, method: string) => (doc.paths[path][method].requestBody?.content["application/json"].schema as { required?: string[] }).required;
    expect(required("/v1/authenticate/{username}/login", "post")).toEqual(["password"]);
    expect(required("/v1/authenticate/{username}/refresh", "post")).toEqual(["accessToken", "refreshToken"]);
    expect(required("/v1/users/{username}", "post")).toEqual(["password"]);
    expect(required("/v1/users/{username}/password", "patch")).toEqual(["newPassword"]);
  });

  it("says how to authenticate: a bearer scheme for every operation, none for login and refresh", () => {
    const d = doc as unknown as { security: unknown; components: { securitySchemes: Record<string, unknown> }; paths: Record<string, Record<string, { security?: unknown }>> };
    expect(d.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer", bearerFormat: "JWT" });
    expect(d.security).toEqual([{ bearerAuth: [] }]);
    expect(d.paths["/v1/authenticate/{username}/login"].post.security).toEqual([]);
    expect(d.paths["/v1/authenticate/{username}/refresh"].post.security).toEqual([]);
    expect(d.paths["/v1/users"].get.security).toBeUndefined(); // the document's default: a token
  });

  it("takes passwords and tokens from a body only, never from a URL's query string (and documents none there)", async () => {
    const params = (path: string, method: string) =>
      ((doc.paths[path][method] as { parameters?: { name: string; in: string }[] }).parameters ?? []).filter((x) => x.in === "query").map((x) => x.name);
    expect(params("/v1/authenticate/{username}/login", "post")).toEqual([]);
    expect(params("/v1/authenticate/{username}/refresh", "post")).toEqual([]);
    expect(params("/v1/users/{username}", "post")).toEqual([]);
    expect(params("/v1/users/{username}/password", "patch")).toEqual([]);

    const post = (path: string, body = "{}", method = "POST") => fetch(`${p.url}${path}`, { method, headers: { "content-type": "application/json" }, body });
    const inQuery = await post(`/v1/authenticate/root/login?password=${encodeURIComponent(ROOT_PASSWORD)}`);
    expect(inQuery.status).toBe(400);
    expect(await inQuery.json()).toEqual({ code: "invalid_argument", message: "password is not taken from the query string (URLs are kept in logs and histories): send it in the body" });
    // by its proto name too, and beside a body that gives it: the same refusal, not "given twice"
    const both = await post(`/v1/authenticate/root/login?password=x`, JSON.stringify({ password: ROOT_PASSWORD }));
    expect(both.status).toBe(400);
    const { accessToken, refreshToken } = await p.login("root", ROOT_PASSWORD);
    const refresh = await post(`/v1/authenticate/root/refresh?refresh_token=${refreshToken}`, JSON.stringify({ accessToken }));
    expect(((await refresh.json()) as { message: string }).message).toMatch(/^refreshToken is not taken from the query string/);
    const change = await fetch(`${p.url}/v1/users/root/password?newPassword=x`, { method: "PATCH", headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" }, body: "{}" });
    expect(change.status).toBe(400);
    // in the body, as always
    expect((await post("/v1/authenticate/root/login", JSON.stringify({ password: ROOT_PASSWORD }))).status).toBe(200);
  });

  it("documents the audit-log export as the CSV it is (not a ZIP)", async () => {
    const d = doc as unknown as { paths: Record<string, Record<string, { responses: Record<string, { content: Record<string, unknown> }> }>> };
    expect(Object.keys(d.paths["/v1/audit-log/export"].get.responses["200"].content)).toEqual(["text/csv"]);
    const { accessToken } = await p.login("root", ROOT_PASSWORD);
    const res = await fetch(`${p.url}/v1/audit-log/export`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(res.headers.get("content-type")).toMatch(/^text\/csv/);
    await res.arrayBuffer();
  });
});
