import JSZip from "jszip";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestGateway, ns, seg, storeTargets, TEST_LIMITS, type TestGateway } from "./harness.js";

/** A multipart/form-data body with one file part and optional text fields. */
function multipart(file: Buffer, fields: Record<string, string> = {}, partName = "importZip") {
  const boundary = "----gov" + Math.random().toString(16).slice(2);
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  }
  parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${partName}"; filename="configs.zip"\r\nContent-Type: application/zip\r\n\r\n`));
  parts.push(file, Buffer.from(`\r\n--${boundary}--\r\n`));
  return { payload: Buffer.concat(parts), headers: { "content-type": `multipart/form-data; boundary=${boundary}` } };
}

async function zipOf(entries: Record<string, string | Buffer>, options: JSZip.JSZipGeneratorOptions<"nodebuffer"> = { type: "nodebuffer" }) {
  const zip = new JSZip();
  for (const [name, data] of Object.entries(entries)) {
    if (name.endsWith("/")) zip.folder(name.slice(0, -1));
    else zip.file(name, data);
  }
  return zip.generateAsync({ ...options, type: "nodebuffer" });
}

for (const target of storeTargets()) {
  describe.skipIf(target.skip)(`ZIP import and export on the ${target.name} store`, () => {
    let gw: TestGateway;
    beforeAll(async () => {
      gw = await createTestGateway(await target.open());
    });
    afterAll(async () => gw?.close());

    const put = (n: string, id: string, data: string) => gw.app.inject({ method: "PUT", url: `/v1/namespaces/${seg(n)}/configs/${seg(id)}`, payload: data, headers: { "content-type": "text/plain" } });
    const upload = (n: string, file: Buffer, fields: Record<string, string> = {}, query = "") =>
      gw.app.inject({ method: "POST", url: `/v1/namespaces/${seg(n)}/configs${query}`, ...multipart(file, fields) });
    const exportZip = (n: string) => gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/export` });
    const list = async (n: string) => (await gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs` })).json();

    it("export → import into another namespace round-trips byte-identically", async () => {
      const a = ns("a");
      const b = ns("b");
      const contents: Record<string, string> = { "app.yaml": "port: 8080\n", "dir/db.json": '{"url":"x"}', "a:b": "é\r\n\ttabs", "empty.txt": " " };
      for (const [id, data] of Object.entries(contents)) await put(a, id, data);
      const first = await exportZip(a);
      expect(first.statusCode).toBe(200);
      expect(first.headers["content-type"]).toBe("application/zip");
      expect(first.headers["content-disposition"]).toMatch(new RegExp(`^attachment; filename="${a.replace(/[{}]/g, "\\$&")}_configs_\\d+\\.zip"`));
      const imported = await upload(b, first.rawPayload);
      expect(imported.statusCode).toBe(200);
      expect(imported.json(), imported.body).toMatchObject({ total: 4, succeeded: 4 });
      expect(await list(b)).toEqual(Object.keys(contents).sort());
      for (const [id, data] of Object.entries(contents)) {
        const r = await gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(b)}/configs/${seg(id)}` });
        expect(Buffer.from(r.json().data)).toEqual(Buffer.from(data));
      }
      const second = await exportZip(b);
      expect(second.rawPayload.equals(first.rawPayload)).toBe(true); // same configs → the same archive bytes
    });

    it("policy skip (default) leaves existing configs; overwrite from the query or a form field replaces them; per-entry outcomes", async () => {
      const n = ns();
      await put(n, "keep", "old");
      await put(n, "same", "same");
      const file = await zipOf({ keep: "new", same: "same", fresh: "f" });
      let r = await upload(n, file);
      expect(r.json()).toEqual({
        total: 3,
        succeeded: 1,
        results: expect.arrayContaining([
          { configId: "keep", outcome: "skipped", reason: expect.stringContaining("policy=overwrite") },
          { configId: "same", outcome: "skipped", reason: expect.any(String) },
          { configId: "fresh", outcome: "created", reason: "" },
        ]),
      });
      r = await upload(n, await zipOf({ keep: "newer", same: "same" }), {}, "?policy=overwrite");
      expect(r.json().results).toEqual(expect.arrayContaining([
        { configId: "keep", outcome: "updated", reason: "" },
        { configId: "same", outcome: "unchanged", reason: "" },
      ]));
      r = await upload(n, await zipOf({ keep: "from form" }), { policy: "overwrite" });
      expect(r.json()).toMatchObject({ succeeded: 1, results: [{ configId: "keep", outcome: "updated" }] });
      const cur = await gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/keep` });
      expect(cur.json().data).toBe("from form");
      r = await upload(n, file, {}, "?policy=merge");
      expect([r.statusCode, r.json().code, r.json().message]).toEqual([400, "invalid_argument", expect.stringContaining("skip (default) or overwrite")]);
    });

    it("'..' and absolute entries are rejected, hidden files and folders skipped, nothing written outside the namespace", async () => {
      const n = ns();
      const long = "x".repeat(600);
      const file = await zipOf({ "../escape": "x", "/abs": "x", "a/../../b": "x", ".hidden": "x", "dir/": "", "dir/.DS_Store": "x", "ok.yaml": "fine", [long]: "x", "ctl\u0001": "x" });
      const r = await upload(n, file);
      expect(r.statusCode).toBe(200);
      const byId = Object.fromEntries(r.json().results.map((x: { configId: string; outcome: string }) => [x.configId, x.outcome]));
      expect(byId).toMatchObject({ "ok.yaml": "created", ".hidden": "skipped", "dir/.DS_Store": "skipped" });
      for (const bad of ["../escape", "a/../../b", long, "ctl\u0001"]) expect(byId[bad]).toBe("rejected"); // same id rules as PUT
      expect(Object.values(byId).filter((o) => o === "rejected").length).toBeGreaterThanOrEqual(2);
      expect(await list(n)).toEqual(["ok.yaml"]);
    });

    it("archives over the entry-count or uncompressed-size limit are refused before anything is written", async () => {
      const n = ns();
      const many = Object.fromEntries(Array.from({ length: TEST_LIMITS.maxZipEntries + 1 }, (_, i) => [`c${i}`, "x"]));
      let r = await upload(n, await zipOf(many));
      expect([r.statusCode, r.json().code]).toEqual([400, "invalid_argument"]);
      expect(r.json().message).toMatch(/entries.*limit of 20.*gov\.limits\.zip-entries/);
      // Highly compressible: small upload, large inflated size (a zip bomb in miniature).
      const bomb = await zipOf({ "a-first": "ok", big1: "0".repeat(300_000), big2: "0".repeat(300_000) }, { type: "nodebuffer", compression: "DEFLATE" });
      expect(bomb.length).toBeLessThan(TEST_LIMITS.maxZipBytes);
      r = await upload(n, bomb);
      expect([r.statusCode, r.json().code]).toEqual([400, "invalid_argument"]);
      expect(r.json().message).toMatch(/gov\.limits\.zip-uncompressed/);
      expect(await list(n)).toEqual([]); // not even "a-first"
    });

    it("a non-ZIP upload, a missing file part or an upload over the size limit → 4xx, nothing written", async () => {
      const n = ns();
      let r = await upload(n, Buffer.from("this is not a zip"));
      expect([r.statusCode, r.json().code, r.json().message]).toEqual([400, "invalid_argument", expect.stringContaining("not a readable ZIP")]);
      r = await gw.app.inject({ method: "POST", url: `/v1/namespaces/${seg(n)}/configs`, ...multipart(Buffer.from("x"), {}, "other") });
      expect([r.statusCode, r.json().code]).toEqual([400, "invalid_argument"]);
      r = await upload(n, Buffer.alloc(TEST_LIMITS.maxZipBytes + 10, 1));
      expect(r.statusCode).toBe(413);
      expect(r.json().code).toBe("resource_exhausted");
      expect(await list(n)).toEqual([]);
    });
  });
}
