// A 404 names what was asked for with every character that would not show written out (`\u200b`): printed raw, a
// config "app.yaml" + U+200B read as if the existing "app.yaml" did not exist. (Users and roles: services/security.)
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespaceProcess, freshSystem, ns, seg, type NamespaceProcess } from "./namespace-harness.js";

const ZWSP = "\u200b";

describe("not-found messages write out characters that do not show", () => {
  let p: NamespaceProcess;
  beforeAll(async () => {
    p = await createNamespaceProcess({}, freshSystem());
  });
  afterAll(async () => p?.close());
  const req = async (method: string, url: string, payload?: string) => {
    const res = await p.proc.http.inject({ method: method as "GET", url, ...(payload === undefined ? {} : { payload, headers: { "content-type": "text/plain" } }) });
    return { status: res.statusCode, message: (res.json() as { message?: string }).message ?? "" };
  };

  const n = ns("zw");
  beforeAll(async () => {
    expect((await req("PUT", `/v1/namespaces/${seg(n)}/configs/app.yaml`, "v: 1")).status).toBe(200);
    const registered = await p.proc.http.inject({ method: "PUT", url: `/v1/namespaces/${seg(n)}/services/order/instances`, payload: { schema: "http", host: "10.0.0.1", port: 80 } });
    expect(registered.statusCode).toBe(200);
  });

  it.each([
    ["a config", "GET", () => `/v1/namespaces/${seg(n)}/configs/${seg(`app${ZWSP}.yaml`)}`, `config "app\\u200b.yaml"`],
    ["a service", "DELETE", () => `/v1/namespaces/${seg(n)}/services/${seg(`order${ZWSP}`)}`, `service "order\\u200b"`],
    ["an instance", "DELETE", () => `/v1/namespaces/${seg(n)}/services/order/instances/${seg(`order@http#10.0.0.1${ZWSP}#80`)}`, `instance "order@http#10.0.0.1\\u200b#80"`],
  ])("%s", async (_what, method, url, named) => {
    const { status, message } = await req(method, url());
    expect(status).toBe(404);
    expect(message).toContain(named);
    expect(message).not.toContain(ZWSP);
  });

  it("a namespace", async () => {
    const { status, message } = await req("DELETE", `/v1/namespaces/${seg(`{zw${ZWSP}}`)}`);
    expect([status, message]).toEqual([404, 'namespace "{zw\\u200b}" does not exist: list them with GET /v1/namespaces']);
  });
});
