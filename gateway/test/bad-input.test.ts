import { Readable } from "node:stream";
import { gzipSync } from "node:zlib";
import { createMemoryConfigStore } from "@gov/config-service";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { platform } from "../../apps/platform.js";
import { createTestGateway, ns, seg, TEST_LIMITS, type TestGateway } from "./harness.js";

/** Whatever a client sends, the answer is a 4xx in the contract's shape, never a 500, and nothing is lost. */
describe("bad input gets a clear 4xx and loses nothing", () => {
  let gw: TestGateway;
  const n = ns("bad");
  beforeAll(async () => {
    gw = await createTestGateway(createMemoryConfigStore({ maxVersions: 100 }));
    await gw.app.inject({ method: "PUT", url: `/v1/namespaces/${seg(n)}/configs/keep`, payload: "precious", headers: { "content-type": "text/plain" } });
  });
  afterAll(async () => gw?.close());

  const cases: { name: string; method: string; url: string; payload?: string | Buffer; headers?: Record<string, string>; status: number; code: string; message?: RegExp }[] = [
    { name: "garbage JSON on import", method: "POST", url: "/configs", payload: "{not json", headers: { "content-type": "application/json" }, status: 400, code: "invalid_argument", message: /not valid JSON/ },
    { name: "JSON of the wrong shape on import", method: "POST", url: "/configs", payload: '{"importZip": 42, "nope": true}', headers: { "content-type": "application/json" }, status: 400, code: "invalid_argument", message: /does not match ImportConfigsRequest/ },
    { name: "import as plain text", method: "POST", url: "/configs", payload: "hello", headers: { "content-type": "text/plain" }, status: 415, code: "invalid_argument", message: /multipart\/form-data/ },
    { name: "multipart config body (the form is not the content)", method: "PUT", url: "/configs/keep", payload: "--x\r\n\r\nhi\r\n--x--", headers: { "content-type": "multipart/form-data; boundary=x" }, status: 415, code: "invalid_argument", message: /raw request body/ },
    { name: "unsupported Content-Encoding", method: "PUT", url: "/configs/keep", payload: "x", headers: { "content-encoding": "zstd" }, status: 415, code: "invalid_argument", message: /gzip/ },
    { name: "binary non-UTF-8 config body", method: "PUT", url: "/configs/keep", payload: Buffer.from([0xff, 0xfe, 0x00, 0xc3]), headers: { "content-type": "application/octet-stream" }, status: 400, code: "invalid_argument", message: /^the request body is not UTF-8 text: configs hold text; convert it to UTF-8/ },
    { name: "JSON string content holding a lone surrogate (no UTF-8 for it)", method: "PUT", url: "/configs/keep", payload: '"a\\ud800b"', headers: { "content-type": "application/json" }, status: 400, code: "invalid_argument", message: /UTF-?8/ },
    { name: "config over the content limit", method: "PUT", url: "/configs/keep", payload: JSON.stringify("x".repeat(TEST_LIMITS.maxContentBytes + 1)), headers: { "content-type": "application/json" }, status: 413, code: "resource_exhausted", message: /limit of \d+ bytes \(gov\.limits\.config-content\)/ },
    { name: "huge raw config body", method: "PUT", url: "/configs/keep", payload: Buffer.alloc(2 * 1024 * 1024, 97), status: 413, code: "resource_exhausted", message: new RegExp(`limit of ${TEST_LIMITS.maxContentBytes} bytes \\(gov\\.limits\\.config-content\\)`) },
    { name: "huge JSON body of an import", method: "POST", url: "/configs", payload: Buffer.alloc(2 * 1024 * 1024, 97), headers: { "content-type": "application/json" }, status: 413, code: "resource_exhausted", message: new RegExp(`limit of ${Math.ceil(TEST_LIMITS.maxZipBytes / 3) * 4 + 64 * 1024} bytes \\(gov\\.limits\\.zip-upload \\(in base64, in a JSON body\\)\\)`) }, // the archive in base64
    { name: "version that is not a number", method: "GET", url: "/configs/keep/versions/1e3", status: 400, code: "invalid_argument", message: /^version must be a whole number, not "1e3"$/ },
    { name: "version with leading zeros", method: "GET", url: "/configs/nope/versions/00000000000001", status: 404, code: "not_found" },
    { name: "version 0", method: "GET", url: "/configs/keep/versions/0", status: 400, code: "invalid_argument", message: /from 1 to 2147483647/ },
    { name: "rollback target out of int32 range", method: "PUT", url: "/configs/keep/to/99999999999", status: 400, code: "invalid_argument", message: /^targetVersion must be at most 2147483647, not "99999999999"$/ },
    { name: "config id with '..' segments", method: "PUT", url: `/configs/${seg("a/../b")}`, payload: "x", status: 400, code: "invalid_argument", message: /"\.\." segments/ },
    { name: "config id that the export route shadows", method: "PUT", url: "/configs/export", payload: "x", status: 400, code: "invalid_argument", message: /reserved/ },
    { name: "config id with a control character", method: "PUT", url: `/configs/${seg("a\u0001")}`, payload: "x", status: 400, code: "invalid_argument" },
    { name: "unknown route", method: "GET", url: "/nope", status: 404, code: "not_found", message: /\/docs/ },
    { name: "an id holding '/' sent unencoded", method: "GET", url: "/configs/dir/sub/db.json", status: 404, code: "not_found", message: /percent-encoded \(dir%2Fdb\.json\)/ },
    { name: "wrong method on a known path", method: "PATCH", url: "/configs/keep", payload: "x", status: 405, code: "unimplemented", message: /use GET, HEAD, PUT, DELETE/ },
    { name: "unknown route with a body that is not JSON: the path is what to fix", method: "POST", url: "/nope", payload: "{", headers: { "content-type": "application/json" }, status: 404, code: "not_found", message: /\/docs/ },
    { name: "wrong method on a known path with a body that is not JSON", method: "PATCH", url: "/configs/keep", payload: "{", headers: { "content-type": "application/json" }, status: 405, code: "unimplemented", message: /use GET, HEAD, PUT, DELETE/ },
    { name: "a trailing slash (an empty segment) is no known path, not a 405 naming another route's methods", method: "PUT", url: "/configs/keep/", payload: "x", status: 404, code: "not_found", message: /path segment is empty/ },
    { name: "bad percent-escape", method: "GET", url: "/configs/%E0%A4%A", status: 400, code: "invalid_argument", message: /percent-escape/ },
  ];

  it("a namespace holding a character that does not show cannot be written into; reads answer as for any namespace", async () => {
    const hidden = `${seg(n)}%E2%80%8B`; // + U+200B: shows as the namespace itself
    const put = await gw.app.inject({ method: "PUT", url: `/v1/namespaces/${hidden}/configs/a`, payload: "x", headers: { "content-type": "text/plain" } });
    expect([put.statusCode, put.json().message]).toEqual([400, expect.stringContaining("contains U+200B, a character that does not show")]);
    // one created before the rule stays reachable (read, exported, deleted): here it holds nothing
    const get = await gw.app.inject({ method: "GET", url: `/v1/namespaces/${hidden}/configs/a` });
    expect(get.statusCode).toBe(404);
  });

  it("an empty path variable (a doubled or trailing slash) is the same 404, not 'namespace is required' from deeper down", async () => {
    for (const [method, url] of [["GET", "/v1/namespaces//configs/x"], ["PUT", "/v1/namespaces//configs/x"], ["GET", `/v1/namespaces/${seg(n)}/configs//versions`]]) {
      const r = await gw.app.inject({ method: method as "GET", url, payload: method === "PUT" ? "x" : undefined, headers: { "content-type": "text/plain" } });
      expect([r.statusCode, r.json()], `${method} ${url}`).toEqual([404, { code: "not_found", message: `no endpoint ${method} ${url}: a path segment is empty (a trailing or doubled "/"): remove it` }]);
    }
  });

  for (const c of cases) {
    it(`${c.name} → ${c.status} ${c.code}`, async () => {
      const r = await gw.app.inject({
        method: c.method as "GET",
        url: `/v1/namespaces/${seg(n)}${c.url}`,
        payload: c.payload,
        headers: { "content-type": "text/plain", ...c.headers },
      });
      expect(r.statusCode).toBe(c.status);
      expect(r.headers["content-type"]).toMatch(/application\/json/);
      const body = r.json();
      expect(Object.keys(body).sort()).toEqual(["code", "message"]);
      expect(body.code).toBe(c.code);
      if (c.message) expect(body.message).toMatch(c.message);
    });
  }

  it("after all of that the existing config is untouched", async () => {
    const r = await gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/keep` });
    expect(r.json()).toMatchObject({ data: "precious", version: 1 });
    const list = await gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs` });
    expect(list.json()).toEqual(["keep"]);
  });

  it("a random byte storm on every route never produces a 5xx", async () => {
    const routes = ["/configs", "/configs/a", "/configs/a/to/1", "/configs/a/versions", "/configs/a/versions/1", "/configs/export"];
    let seed = 42;
    const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    for (let i = 0; i < 400; i++) {
      const payload = Buffer.from(Array.from({ length: Math.floor(rand() * 200) }, () => Math.floor(rand() * 256)));
      const method = ["GET", "PUT", "POST", "DELETE"][i % 4] as "GET";
      const type = ["application/json", "multipart/form-data; boundary=x", "text/plain", "application/zip"][Math.floor(rand() * 4)];
      const r = await gw.app.inject({ method, url: `/v1/namespaces/${seg(n)}${routes[i % routes.length]}`, payload: method === "GET" ? undefined : payload, headers: { "content-type": type } });
      expect([method, routes[i % routes.length], type, r.statusCode < 500], r.body).toEqual([method, routes[i % routes.length], type, true]);
    }
  });

  it("an export whose namespace is not Latin-1 still gets a valid attachment header", async () => {
    const n = "{开发}";
    await gw.app.inject({ method: "PUT", url: `/v1/namespaces/${seg(n)}/configs/a`, payload: "x", headers: { "content-type": "text/plain" } });
    const r = await gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/export` });
    expect(r.statusCode).toBe(200);
    expect(r.headers["content-disposition"]).toMatch(/^attachment; filename="\{__\}_configs_\d+\.zip"; filename\*=UTF-8''%7B%E5%BC%80%E5%8F%91%7D_configs_\d+\.zip$/);
  });

  it("an export whose namespace holds / or \\ is named with _ in their place (clients keep only what follows a path separator)", async () => {
    for (const [n, named] of [["{dev}/x", "\\{dev\\}_x"], ["{dev}\\y", "\\{dev\\}_y"]]) {
      await gw.app.inject({ method: "PUT", url: `/v1/namespaces/${seg(n)}/configs/a`, payload: "x", headers: { "content-type": "text/plain" } });
      const r = await gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/export` });
      expect(r.statusCode).toBe(200);
      expect(r.headers["content-disposition"]).toMatch(new RegExp(`^attachment; filename="${named}_configs_\\d+\\.zip"; filename\\*=UTF-8''%7Bdev%7D_[xy]_configs_\\d+\\.zip$`));
    }
  });

  it("a route that takes no body refuses one that says something (it was dropped: a rollback went to the path's version); {} and null pass", async () => {
    const n = ns("nobody");
    const url = `/v1/namespaces/${seg(n)}/configs/c`;
    for (const v of ["v1", "v2", "v3"]) await gw.app.inject({ method: "PUT", url, payload: v, headers: { "content-type": "text/plain" } });
    const json = { "content-type": "application/json" };
    const refused = await gw.app.inject({ method: "PUT", url: `${url}/to/1`, payload: '{"targetVersion":2}', headers: json });
    expect([refused.statusCode, refused.json().code]).toEqual([400, "invalid_argument"]);
    expect(refused.json().message).toMatch(/^PUT \/v1\/namespaces\/\{namespace\}\/configs\/\{configId\}\/to\/\{targetVersion\} takes no body: its fields come from the path; send the request without one$/);
    expect((await gw.app.inject({ method: "GET", url })).json().data).toBe("v3"); // nothing was done
    for (const nothing of ["", "{}", " { } ", "null"]) {
      const ok = await gw.app.inject({ method: "PUT", url: `${url}/to/${nothing === "" ? 1 : 2}`, payload: nothing, headers: json });
      expect([JSON.stringify(nothing), ok.statusCode]).toEqual([JSON.stringify(nothing), 200]);
    }
  });

  it("a refused watch answers its 4xx, not a 200 event stream", async () => {
    const r = await gw.app.inject({ method: "GET", url: "/v1/namespaces/dev/configs/a/watch" });
    expect([r.statusCode, r.json().code]).toEqual([400, "invalid_argument"]);
  });

  it("an unknown import policy is refused without echoing it whole", async () => {
    const policy = "p".repeat(15_000);
    const r = await gw.app.inject({ method: "POST", url: `/v1/namespaces/${seg(n)}/configs?policy=${policy}`, payload: "", headers: { "content-type": "application/zip" } });
    expect([r.statusCode, r.json().code]).toEqual([400, "invalid_argument"]);
    expect(r.json().message).toMatch(/use skip \(default\) or overwrite/);
    expect(r.body.length).toBeLessThan(500);
  });

  it("a field the JSON body and the query string both give must say the same; a form's too; a repeated parameter too", async () => {
    const post = (query: string, body: object) =>
      gw.app.inject({ method: "POST", url: `/v1/namespaces/${seg(n)}/configs${query}`, payload: JSON.stringify({ importZip: Buffer.from("not a zip").toString("base64"), ...body }), headers: { "content-type": "application/json" } });
    const same = await post("?policy=skip", { policy: "skip" });
    expect(same.json().message).toMatch(/not a readable ZIP/); // taken: the archive was the problem
    const differs = await post("?policy=overwrite", { policy: "skip" });
    expect([differs.statusCode, differs.json().message]).toEqual([400, expect.stringMatching(/^policy is given by the body and by the query string, with different values/)]);
    const repeated = await post("?policy=skip&policy=overwrite", {});
    expect([repeated.statusCode, repeated.json().message]).toEqual([400, expect.stringMatching(/^policy is given twice in the query string, with different values/)]);
    // a form: its text field and the query string (the form's silently won, then said "use policy=overwrite"), and a
    // misspelt text field (silently ignored, its default in force)
    const form = (fields: string, query = "") => {
      const boundary = "b0undary";
      const body = `${fields}--${boundary}\r\nContent-Disposition: form-data; name="importZip"; filename="a.zip"\r\nContent-Type: application/zip\r\n\r\nnot a zip\r\n--${boundary}--\r\n`;
      return gw.app.inject({ method: "POST", url: `/v1/namespaces/${seg(n)}/configs${query}`, payload: body, headers: { "content-type": `multipart/form-data; boundary=${boundary}` } });
    };
    const field = (name: string, value: string) => `--b0undary\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
    const both = await form(field("policy", "skip"), "?policy=overwrite");
    expect([both.statusCode, both.json().message]).toEqual([400, expect.stringMatching(/^policy is given by the form and by the query string/)]);
    const misspelt = await form(field("polcy", "overwrite"));
    expect([misspelt.statusCode, misspelt.json().message]).toEqual([400, expect.stringMatching(/^form part polcy is not a field of ImportConfigsRequest: it has .*policy/)]);
  });
});

/**
 * Each REST body is held to the limit of what the rule makes it, whatever the other limits are: a JSON body (a
 * registration, a role) to gov.limits.json-body, a config's raw content to gov.limits.config-content — in the
 * all-in-one process, where other modules' request limits (the registry's 1 MiB) must not widen the JSON one.
 */
describe("body limits follow what the route's body is (all-in-one process)", () => {
  const KB6 = 6 * 1024;
  const json = { "content-type": "application/json" };
  // a registration and a role of about 6 KB, both valid: what each limit must refuse or let through
  const registration = JSON.stringify({ schema: "http", host: "10.0.0.1", port: 80, metadata: { a: "v".repeat(KB6 / 2), b: "v".repeat(KB6 / 2) } });
  const role = JSON.stringify({ desc: "big", resourceActionBind: Array.from({ length: 150 }, (_, i) => ({ namespace: `{team-${i}}`, action: "rw" })) });
  const content = "x".repeat(KB6);

  async function start(env: Record<string, string>): Promise<BuiltProcess> {
    const sources = { file: {}, env: { GOV_SECURITY_ENABLED: "false", GOV_SHUTDOWN_GRACE: "2s", ...env } };
    return buildProcess({ ...platform, sources, logger: createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent") });
  }
  const send = (proc: BuiltProcess, method: "PUT" | "POST", url: string, payload: string | Buffer, headers: Record<string, string> = {}) =>
    proc.http.inject({ method, url, payload, headers: { "content-type": "text/plain", ...headers } });
  const register = (proc: BuiltProcess, n: string, headers: Record<string, string> = {}, payload: string | Buffer = registration) =>
    send(proc, "PUT", `/v1/namespaces/${seg(n)}/services/big/instances`, payload, { ...json, ...headers });
  const putRole = (proc: BuiltProcess, name: string) => send(proc, "PUT", `/v1/roles/${name}`, role, json);
  const putConfig = (proc: BuiltProcess, n: string, payload: string | Buffer, headers: Record<string, string> = {}) => send(proc, "PUT", `/v1/namespaces/${seg(n)}/configs/big.yaml`, payload, headers);
  const refusal = (bytes: number, setting: string) => ({ code: "resource_exhausted", message: expect.stringContaining(`limit of ${bytes} bytes (${setting})`) });

  describe("gov.limits.json-body lowered to 2 KiB", () => {
    let proc: BuiltProcess;
    beforeAll(async () => void (proc = await start({ GOV_LIMITS_JSON_BODY: "2KiB" })));
    afterAll(() => proc?.shutdown());

    it("a 6 KB JSON registration or role is 413 naming gov.limits.json-body; a 6 KB raw config is stored", async () => {
      const n = ns("json");
      for (const r of [await register(proc, n), await putRole(proc, "big")]) expect([r.statusCode, r.json()]).toEqual([413, refusal(2048, "gov.limits.json-body")]);
      const put = await putConfig(proc, n, content);
      expect([put.statusCode, put.json()]).toEqual([200, true]);
    });

    it("a gzip JSON body is held to gov.limits.json-body inflated, a gzip raw config to gov.limits.config-content", async () => {
      const n = ns("gzip");
      const zipped = await register(proc, n, { "content-encoding": "gzip" }, gzipSync(registration));
      expect([zipped.statusCode, zipped.json()]).toEqual([413, { code: "resource_exhausted", message: expect.stringMatching(/inflates to more than the limit of 2048 bytes \(gov\.limits\.json-body\)/) }]);
      const put = await putConfig(proc, n, gzipSync(content), { "content-encoding": "gzip" });
      expect([put.statusCode, put.json()]).toEqual([200, true]);
    });

    it("Connect is unaffected: its limit is the listener's message limit, not gov.limits.json-body", async () => {
      const message = { ...JSON.parse(registration), namespace: ns("connect"), serviceId: "big" };
      const r = await send(proc, "POST", "/gov.registry.v1.RegistryService/RegisterInstance", JSON.stringify(message), json);
      expect([r.statusCode, r.json().registered]).toEqual([200, true]);
    });
  });

  describe("gov.limits.config-content lowered to 4 KiB", () => {
    let proc: BuiltProcess;
    beforeAll(async () => void (proc = await start({ GOV_LIMITS_CONFIG_CONTENT: "4KiB" })));
    afterAll(() => proc?.shutdown());

    it("a raw config over it is 413 naming gov.limits.config-content, plain or gzip; JSON bodies keep gov.limits.json-body", async () => {
      const n = ns("content");
      // the gateway's refusals (from the declared length; while inflating), not the service's after the body was read
      const plain = await putConfig(proc, n, content);
      expect([plain.statusCode, plain.json()]).toEqual([413, refusal(4096, "gov.limits.config-content")]);
      // the size it was sent with (its Content-Length), the limit, the setting that raises it
      expect(plain.json().message).toBe(`the request body (${Buffer.byteLength(content)} bytes) is over the limit of 4096 bytes (gov.limits.config-content): send a smaller body, or raise the setting`);
      const zipped = await putConfig(proc, n, gzipSync(content), { "content-encoding": "gzip" });
      expect([zipped.statusCode, zipped.json()]).toEqual([413, refusal(4096, "gov.limits.config-content")]);
      expect(zipped.json().message).toMatch(/^the request body inflates to more than the limit/);
      const r = await register(proc, n);
      expect([r.statusCode, r.json()]).toEqual([200, true]);
    });

    it("content sent as a JSON string is held to the limit once unwrapped, not with its escapes, as Connect holds `data`", async () => {
      const n = ns("wrapped");
      // 4,096 bytes of content, 1,000 of them newlines: a 5,098-byte JSON string (what OpenAPI-generated clients send)
      const text = `${"a\n".repeat(1000)}${"b".repeat(2096)}`;
      const put = await putConfig(proc, n, JSON.stringify(text), json);
      expect([put.statusCode, put.json()]).toEqual([200, true]);
      const read = await proc.http.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/big.yaml` });
      expect(read.json().config?.data ?? read.json().data).toBe(text);
      // one byte more of content: the content's limit, as Connect says it
      const over = await putConfig(proc, n, JSON.stringify(`${text}c`), json);
      expect([over.statusCode, over.json()]).toEqual([413, refusal(4096, "gov.limits.config-content")]);
      // raw content sent chunked (no declared length) is held to its own limit, not to the JSON-string one
      const chunked = await proc.http.inject({ method: "PUT", url: `/v1/namespaces/${seg(n)}/configs/big.yaml`, payload: Readable.from([Buffer.from(content)]), headers: { "content-type": "text/plain" } });
      expect([chunked.statusCode, chunked.json()]).toEqual([413, refusal(4096, "gov.limits.config-content")]);
    });
  });

  describe("the defaults (1 MiB each)", () => {
    let proc: BuiltProcess;
    beforeAll(async () => void (proc = await start({})));
    afterAll(() => proc?.shutdown());

    it("6 KB bodies of every kind are taken; over 1 MiB, each names its own setting", async () => {
      const n = ns("defaults");
      for (const r of [await register(proc, n), await putRole(proc, "big"), await putConfig(proc, n, content)]) expect([r.statusCode, r.json()]).toEqual([200, true]);
      const big = Buffer.alloc(1024 * 1024 + 1, 97);
      const r = await register(proc, n, {}, big);
      expect([r.statusCode, r.json()]).toEqual([413, refusal(1024 * 1024, "gov.limits.json-body")]);
      const put = await putConfig(proc, n, big);
      expect([put.statusCode, put.json()]).toEqual([413, refusal(1024 * 1024, "gov.limits.config-content")]);
    });
  });
});
