import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { ConnectError } from "@connectrpc/connect";
import { createMemoryConfigStore } from "@gov/config-service";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configClients, createTestGateway, ns, seg, TEST_LIMITS, type TestGateway } from "./harness.js";

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** One rule per thing: what REST does with content, Connect, gRPC-Web and gRPC do the same (contract §3). */
describe("content rules are the same on every protocol", () => {
  let gw: TestGateway;
  let urls: { url: string; grpcUrl: string };
  const n = ns("rules");
  const base = () => `${urls.url}/v1/namespaces/${seg(n)}/configs`;
  beforeAll(async () => {
    gw = await createTestGateway(createMemoryConfigStore({ maxVersions: 100 }));
    urls = await gw.listen();
  });
  afterAll(async () => gw?.close());

  it("a UTF-8 BOM is stored as sent and the hash is SHA-256 of the bytes received, on REST and every RPC protocol", async () => {
    const bytes = Buffer.from("\ufeffport: 1\n", "utf8");
    expect((await fetch(`${base()}/bom-rest`, { method: "PUT", body: bytes, headers: { "content-type": "text/plain" } })).status).toBe(200);
    const rest = await (await fetch(`${base()}/bom-rest`)).json();
    expect([rest.data, rest.hash]).toEqual([bytes.toString("utf8"), sha256(bytes)]);
    expect(rest.data.charCodeAt(0)).toBe(0xfeff);
    for (const { name, client } of configClients(urls)) {
      const id = `bom-${name.replace(/\W/g, "")}`;
      await client.setConfig({ namespace: n, configId: id, data: bytes.toString("utf8") });
      const got = (await client.getConfig({ namespace: n, configId: id })).config!;
      expect([name, got.data.charCodeAt(0), got.hash]).toEqual([name, 0xfeff, sha256(bytes)]);
    }
  });

  it("Content-Encoding: gzip is decoded and stored as the plain text", async () => {
    const r = await fetch(`${base()}/gz`, { method: "PUT", body: gzipSync(Buffer.from("zipped: true\n")), headers: { "content-type": "text/plain", "content-encoding": "gzip" } });
    expect(r.status).toBe(200);
    expect((await (await fetch(`${base()}/gz`)).json()).data).toBe("zipped: true\n");
  });

  it("a lone surrogate escape (which UTF-8 cannot hold) is refused on REST and Connect JSON alike; nothing is stored", async () => {
    const rest = await fetch(`${base()}/lone`, { method: "PUT", body: '"a\\ud800b"', headers: { "content-type": "application/json" } });
    expect([rest.status, (await rest.json()).code]).toEqual([400, "invalid_argument"]);
    const connect = await fetch(`${urls.url}/gov.config.v1.ConfigService/SetConfig`, {
      method: "POST",
      body: JSON.stringify({ namespace: n, configId: "lone" }).replace(/}$/, ',"data":"a\\udc00b"}'),
      headers: { "content-type": "application/json" },
    });
    expect([connect.status, (await connect.json()).code]).toEqual([400, "invalid_argument"]);
    expect((await fetch(`${base()}/lone`)).status).toBe(404);
    // the pair is fine: stored as sent
    expect((await fetch(`${base()}/pair`, { method: "PUT", body: '"\\ud83d\\ude00"', headers: { "content-type": "application/json" } })).status).toBe(200);
    expect((await (await fetch(`${base()}/pair`)).json()).data).toBe("😀");
  });

  it("empty content is accepted the same on REST and on every RPC protocol", async () => {
    expect((await fetch(`${base()}/empty-rest`, { method: "PUT", body: "" })).status).toBe(200);
    expect((await (await fetch(`${base()}/empty-rest`)).json()).data).toBe("");
    for (const { name, client } of configClients(urls)) {
      const id = `empty-${name.replace(/\W/g, "")}`;
      expect(await client.setConfig({ namespace: n, configId: id, data: "" }).then((r) => [name, r.changed])).toEqual([name, true]);
    }
  });

  it("content over gov.limits.config-content is resource_exhausted on every protocol (413 on REST)", async () => {
    const big = "x".repeat(TEST_LIMITS.maxContentBytes + 1);
    const r = await fetch(`${base()}/big`, { method: "PUT", body: big, headers: { "content-type": "text/plain" } });
    expect(r.status).toBe(413);
    const body = await r.json();
    expect(body.code).toBe("resource_exhausted");
    // REST refuses the raw body from its declared length, before the service sees it; the limit and setting are the same
    const limit = `over the limit of ${TEST_LIMITS.maxContentBytes} bytes (gov.limits.config-content)`;
    expect(body.message).toContain(limit);
    for (const { name, client } of configClients(urls)) {
      const err = await client.setConfig({ namespace: n, configId: "big", data: big }).catch((e: unknown) => ConnectError.from(e));
      expect([name, (err as ConnectError).code, (err as ConnectError).rawMessage]).toEqual([name, 8, expect.stringContaining(limit)]);
    }
  });

  it("version 0 gives the same message on REST and on every RPC protocol, naming the range", async () => {
    await fetch(`${base()}/v`, { method: "PUT", body: "1" });
    const rest = await (await fetch(`${base()}/v/versions/0`)).json();
    expect(rest).toEqual({ code: "invalid_argument", message: expect.stringMatching(/from 1 to 2147483647/) });
    for (const { name, client } of configClients(urls)) {
      const err = ConnectError.from(await client.getConfigVersion({ namespace: n, configId: "v", version: 0 }).catch((e: unknown) => e));
      expect([name, err.code, err.rawMessage]).toEqual([name, 3, rest.message]);
    }
  });

  it('"{}" as a namespace is refused without suggesting "{{}}"', async () => {
    const r = await (await fetch(`${urls.url}/v1/namespaces/${seg("{}")}/configs`)).json();
    expect(r.code).toBe("invalid_argument");
    expect(r.message).not.toContain("{{}}");
    expect(r.message).toMatch(/\{dev\}/);
  });

  it("an import with two files is 400 invalid_argument, not 413 'reach files limit'", async () => {
    const form = new FormData();
    form.append("importZip", new Blob([new Uint8Array([1])]), "a.zip");
    form.append("policy", new Blob([new Uint8Array([2])]), "b.txt");
    const r = await fetch(base(), { method: "POST", body: form });
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({ code: "invalid_argument", message: expect.stringMatching(/one file part/) });
  });

  it("an import form without its file part says which part is missing (not that the file is empty)", async () => {
    const form = new FormData();
    form.append("policy", "overwrite");
    const r = await fetch(base(), { method: "POST", body: form });
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({ code: "invalid_argument", message: expect.stringMatching(/no file part named importZip/) });
  });

  it("an archive sent as the raw body of an import is 415 saying how to send it, without quoting its bytes", async () => {
    const zip = Buffer.concat([Buffer.from("PK\x03\x04"), Buffer.alloc(64, 7)]);
    for (const type of ["application/zip", "application/octet-stream"]) {
      const r = await fetch(base(), { method: "POST", body: zip, headers: { "content-type": type } });
      const text = await r.text();
      expect([r.status, JSON.parse(text)]).toEqual([415, { code: "invalid_argument", message: expect.stringContaining("curl -F importZip=@archive.zip") }]);
      expect(text).not.toContain("PK");
    }
  });

  it("a JSON body may start with a byte-order mark (RFC 8259 allows a parser to skip it)", async () => {
    const body = Buffer.concat([Buffer.from("\ufeff", "utf8"), Buffer.from(JSON.stringify({ importZip: Buffer.from("not a zip").toString("base64") }))]);
    const r = await fetch(base(), { method: "POST", body, headers: { "content-type": "application/json" } });
    expect(await r.json()).toEqual({ code: "invalid_argument", message: expect.stringMatching(/not a readable ZIP/) }); // the JSON was read
  });

  it("a Content-Type Fastify cannot parse is still raw content, as the README says (any content type)", async () => {
    const r = await fetch(`${base()}/odd-type`, { method: "PUT", body: "k: v\n", headers: { "content-type": "nonsense" } });
    expect(r.status).toBe(200);
    expect((await (await fetch(`${base()}/odd-type`)).json()).data).toBe("k: v\n");
  });
});
