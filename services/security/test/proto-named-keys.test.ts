import { describe, expect, it } from "vitest";
import { ns, sharedRootSession } from "./harness.js";

const seg = encodeURIComponent;

// A JSON member named __proto__ is lost on its way into a protobuf-es map (a plain object), so it is refused; the check
// must look at member names as JSON reads them (escapes included), and not at values, which are stored like any text.
describe("the name __proto__ in a JSON body: refused as a key however it is spelled, stored as a value", () => {
  const session = sharedRootSession();

  it("a role named __proto__ can be bound to a user (PATCH /v1/users/{u}/role [\"__proto__\"]) and grants what it binds", async () => {
    const { p, root } = session;
    const dev = ns("proto");
    expect((await p.rest("PUT", "/v1/roles/__proto__", { token: root, body: { desc: "odd name", resourceActionBind: [{ namespace: dev, action: "r" }] } })).status).toBe(200);
    expect((await p.rest("POST", "/v1/users/proto-user", { token: root, body: { password: "s3cret-pass" } })).status).toBe(200);
    const bound = await p.rest("PATCH", "/v1/users/proto-user/role", { token: root, body: ["__proto__"] });
    expect([bound.status, bound.body]).toEqual([200, true]);
    expect((await p.rest("GET", "/v1/users", { token: root })).body).toContainEqual({ username: "proto-user", roles: ["__proto__"], locked: false });
    const { accessToken } = await p.login("proto-user", "s3cret-pass");
    expect((await p.rest("GET", `/v1/namespaces/${seg(dev)}/configs`, { token: accessToken })).status).toBe(200);
    expect((await p.rest("GET", `/v1/namespaces/${seg(ns("other"))}/configs`, { token: accessToken })).status).toBe(403);
  });

  it("a metadata value __proto__ is stored; a key __proto__ written with a JSON escape is refused (400), not silently dropped", async () => {
    const { p, root } = session;
    const dev = ns("meta");
    const instances = `/v1/namespaces/${seg(dev)}/services/order/instances`;
    expect((await p.rest("PUT", instances, { token: root, body: { schema: "http", host: "h", port: 1 } })).status).toBe(200);
    const metadata = `${instances}/${seg("order@http#h#1")}/metadata`;
    for (const spelled of [String.raw`{"\u005f_proto__":"x","zone":"b"}`, String.raw`{"__pr\u006fto__":"x"}`, `{"__proto__" : "x"}`]) {
      const r = await p.rest("PUT", metadata, { token: root, body: spelled, headers: { "content-type": "application/json" } });
      expect([spelled, r.status, r.body]).toEqual([spelled, 400, { code: "invalid_argument", message: expect.stringContaining('the key "__proto__" cannot be stored') }]);
    }
    // the same over Connect (JSON)
    const connect = await fetch(`${p.url}/gov.registry.v1.RegistryService/SetInstanceMetadata`, {
      method: "POST",
      headers: { authorization: `Bearer ${root}`, "content-type": "application/json" },
      body: String.raw`{"namespace":${JSON.stringify(dev)},"serviceId":"order","instanceId":"order@http#h#1","metadata":{"\u005f_proto__":"x"}}`,
    });
    expect([connect.status, ((await connect.json()) as { code: string }).code]).toEqual([400, "invalid_argument"]);
    expect((await p.rest("GET", instances, { token: root })).body[0].metadata).toEqual({}); // nothing of the refused calls
    const value = await p.rest("PUT", metadata, { token: root, body: { zone: "__proto__" } });
    expect([value.status, value.body]).toEqual([200, true]);
    expect((await p.rest("GET", instances, { token: root })).body[0].metadata).toEqual({ zone: "__proto__" });
  });
});
