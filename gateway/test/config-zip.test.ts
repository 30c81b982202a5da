import { randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";
import JSZip from "jszip";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configClients, createTestGateway, ns, seg, storeTargets, TEST_LIMITS, type TestGateway } from "./harness.js";
import { multipart, rawZip, zeroBomb } from "./zip-fixtures.js";

async function zipOf(entries: Record<string, string | Buffer>, options: JSZip.JSZipGeneratorOptions<"nodebuffer"> = { type: "nodebuffer" }) {
  const zip = new JSZip();
  for (const [name, data] of Object.entries(entries)) {
    if (name.endsWith("/")) zip.folder(name.slice(0, -1));
    else zip.file(name, data);
  }
  return zip.generateAsync({ ...options, type: "nodebuffer" });
}

/** The names and general purpose flags of an archive's central directory, as written. */
function centralNames(zip: Buffer): { name: Buffer; flags: number }[] {
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 5, 6]));
  const count = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  const out = [];
  for (let i = 0; i < count; i++) {
    const nameLength = zip.readUInt16LE(at + 28);
    out.push({ flags: zip.readUInt16LE(at + 8), name: zip.subarray(at + 46, at + 46 + nameLength) });
    at += 46 + nameLength + zip.readUInt16LE(at + 30) + zip.readUInt16LE(at + 32);
  }
  return out;
}

/** Info-ZIP Unicode Path extra field (0x7075): version 1, CRC-32 of the header's name, the UTF-8 name. */
function unicodePathField(headerName: Buffer, utf8Name: string): Buffer {
  const name = Buffer.from(utf8Name);
  const field = Buffer.alloc(9 + name.length);
  field.writeUInt16LE(0x7075, 0);
  field.writeUInt16LE(5 + name.length, 2);
  field.writeUInt8(1, 4);
  field.writeUInt32LE(crc32(headerName), 5);
  name.copy(field, 9);
  return field;
}

// Ids the API accepts that tools and naive archive code tend to mangle: every one must come back byte-identical.
const ACCEPTED_IDS = [
  "app.yaml",
  "dir/db.json",
  "a:b",
  "C:x",
  "x:",
  "deep/er/still/deeper.txt",
  "é/ü 日本語.txt",
  "emoji-😀",
  "e\u0301-nfd", // NFD: never normalised to NFC
  "\u00e9-nfc",
  "with space ",
  " leading space",
  "%41%2F",
  "#hash?q=1&x",
  "x.",
  "x..",
  "dir/x.",
  "dots.in..middle",
  "~tilde",
  "CON",
  "nbsp\u00a0",
  "line\u2028sep",
  "c1\u0085control",
  "bidi\u202etxt.exe",
  "a".repeat(512),
  "é".repeat(512),
  "😀".repeat(300), // 300 characters (600 UTF-16 units: refused as "600 characters" before)
];
// Ids refused at write time, each for a reason the message gives.
const REFUSED_IDS: [string, RegExp][] = [
  ["a\\b", /"\\"/],
  ["..x", /hidden files/],
  ["dir/", /end with "\/"/],
  ["a//b", /empty segment/],
  ["/abs", /start with "\/"/],
  ["./x", /"\." or "\.\." segments/],
  ["a/../b", /"\." or "\.\." segments/],
  ["x/..", /"\." or "\.\." segments/], // a lone ".." never reaches the service over REST: URL resolution removes it
  [".env", /hidden files/],
  ["dir/.hidden", /hidden files/],
  ["__MACOSX/x", /__MACOSX/],
  ["C:/x", /drive letter/],
  ["z:/", /drive letter|end with/],
  ["ctl\u0001", /control characters/],
  ["del\u007f", /control characters/],
  ["x".repeat(513), /513 characters long, over the limit of 512/],
  ["😀".repeat(513), /513 characters long, over the limit of 512/], // characters, not UTF-16 units (it said 1026)
  ["export", /reserved/],
];

for (const target of storeTargets()) {
  describe.skipIf(target.skip)(`ZIP import and export on the ${target.name} store`, () => {
    let gw: TestGateway;
    beforeAll(async () => {
      gw = await createTestGateway(await target.open());
    });
    afterAll(async () => gw?.close());

    const put = (n: string, id: string, data: string) => gw.app.inject({ method: "PUT", url: `/v1/namespaces/${seg(n)}/configs/${seg(id)}`, payload: data, headers: { "content-type": "text/plain" } });
    const get = (n: string, id: string) => gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/${seg(id)}` });
    const upload = (n: string, file: Buffer, fields: Record<string, string> = {}, query = "") =>
      gw.app.inject({ method: "POST", url: `/v1/namespaces/${seg(n)}/configs${query}`, ...multipart(file, fields) });
    const exportZip = (n: string) => gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs/export` });
    const list = async (n: string) => (await gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs` })).json();
    const rows = (r: { json(): { results: { configId: string; outcome: string; reason: string }[] } }) => r.json().results.map((x) => [x.configId, x.outcome]);

    it("export → import round-trips every accepted id and content byte-identically; refused ids are refused at write time with the reason", async () => {
      const a = ns("a");
      const b = ns("b");
      const contents = new Map<string, string>();
      ACCEPTED_IDS.forEach((id, i) => contents.set(id, ["port: 8080\n", "\ufeffBOM kept", "é\r\n\ttabs\u0000nul", "", " ", "x".repeat(i)][i % 6]));
      // Written in batches that fit the archive limits of the test gateway (20 entries).
      const ids = [...contents.keys()];
      for (let at = 0; at < ids.length; at += TEST_LIMITS.maxZipEntries) {
        const batch = ids.slice(at, at + TEST_LIMITS.maxZipEntries);
        const from = `${a}${at}`;
        const to = `${b}${at}`;
        for (const id of batch) expect((await put(from, id, contents.get(id)!)).json(), id).toBe(true);
        const first = await exportZip(from);
        expect(first.statusCode).toBe(200);
        expect(first.headers["content-type"]).toBe("application/zip");
        expect(first.headers["content-disposition"]).toMatch(/^attachment; filename=".*_configs_\d+\.zip"/);
        // Names are written verbatim, and every non-ASCII one is marked UTF-8 (general purpose bit 11).
        const written = centralNames(first.rawPayload);
        expect(written.map((e) => e.name.toString("utf8")).sort()).toEqual([...batch].sort());
        for (const e of written) if (e.name.some((byte) => byte > 0x7f)) expect(e.flags & 0x800, e.name.toString()).toBe(0x800);

        const imported = await upload(to, first.rawPayload);
        expect(imported.statusCode, imported.body).toBe(200);
        expect(imported.json()).toMatchObject({ total: batch.length, succeeded: batch.length });
        expect(new Set(imported.json().results.map((r: { outcome: string }) => r.outcome))).toEqual(new Set(["created"]));
        expect(await list(to)).toEqual([...batch].sort());
        for (const id of batch) {
          const r = await get(to, id);
          expect(Buffer.from(r.json().data, "utf8").equals(Buffer.from(contents.get(id)!, "utf8")), id).toBe(true);
          expect(r.json().hash).toBe((await get(from, id)).json().hash);
        }
        const second = await exportZip(to);
        expect(second.rawPayload.equals(first.rawPayload)).toBe(true); // same configs → the same archive bytes
      }

      for (const [id, why] of REFUSED_IDS) {
        const r = await put(a, id, "x");
        expect([r.statusCode, r.json().code], id).toEqual([400, "invalid_argument"]);
        expect(r.json().message, id).toMatch(why);
        expect(r.json().message.length, id).toBeLessThan(1000); // an over-long id is never echoed back
      }
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
        results: [
          { configId: "keep", outcome: "skipped", reason: expect.stringContaining("policy=overwrite") },
          { configId: "same", outcome: "skipped", reason: expect.any(String) },
          { configId: "fresh", outcome: "created" },
        ],
      });
      r = await upload(n, await zipOf({ keep: "newer", same: "same" }), {}, "?policy=overwrite");
      expect(r.json().results).toEqual([
        { configId: "keep", outcome: "updated" },
        { configId: "same", outcome: "unchanged" },
      ]);
      r = await upload(n, await zipOf({ keep: "from form" }), { policy: "overwrite" });
      expect(r.json()).toMatchObject({ succeeded: 1, results: [{ configId: "keep", outcome: "updated" }] });
      expect((await get(n, "keep")).json().data).toBe("from form");
      r = await upload(n, file, {}, "?policy=merge");
      expect([r.statusCode, r.json().code, r.json().message]).toEqual([400, "invalid_argument", expect.stringContaining("skip (default) or overwrite")]);
    });

    it("every entry gets exactly one row, in archive order: unsafe, hidden, folder, duplicate, shadowed and odd-encoding names", async () => {
      const n = ns();
      const long = "x".repeat(600);
      const cp437 = Buffer.from([0x63, 0x61, 0x66, 0x82]); // "café" in CP437
      const entries = [
        { name: "../escape", data: "x" },
        { name: "/abs", data: "x" },
        { name: "a/../../b", data: "x" },
        { name: ".hidden", data: "x" },
        { name: "dir/", method: 0 },
        { name: "dir/.DS_Store", data: "x" },
        { name: "__MACOSX/._ok.yaml", data: "x" },
        { name: "ok.yaml", data: "fine" },
        { name: long, data: "x" },
        { name: "win\\path.txt", data: "x" },
        { name: "twice", data: "first" },
        { name: "twice", data: "second" },
        { name: "../x", data: "evil" }, // would have shadowed "x" in a reader that resolves "../x" to "x"
        { name: "x", data: "legit" },
        { name: cp437, data: "legacy name, unflagged" },
        { name: Buffer.from([0x63, 0x61, 0x66, 0x83]), data: "another legacy name" }, // distinct bytes, distinct row
        { name: Buffer.from([0x66, 0xff]), data: "x", utf8Flag: true }, // flagged UTF-8 but is not
        { name: Buffer.from("naïve"), data: "UTF-8 without the flag", utf8Flag: false },
        { name: cp437, data: "Info-ZIP Unicode Path", extra: unicodePathField(cp437, "café-unicode-path") },
      ];
      const r = await upload(n, rawZip(entries));
      expect(r.statusCode, r.body).toBe(200);
      const body = r.json();
      expect(body.total).toBe(entries.length);
      expect(rows(r)).toEqual([
        ["../escape", "rejected"],
        ["/abs", "rejected"],
        ["a/../../b", "rejected"],
        [".hidden", "skipped"],
        ["dir/", "skipped"],
        ["dir/.DS_Store", "skipped"],
        ["__MACOSX/._ok.yaml", "skipped"],
        ["ok.yaml", "created"],
        [`${"x".repeat(512)}…`, "rejected"], // the row names it, cut short: oversized input is never echoed whole
        ["win\\path.txt", "rejected"],
        ["twice", "rejected"],
        ["twice", "rejected"],
        ["../x", "rejected"],
        ["x", "created"],
        ["caf\ufffd", "rejected"],
        ["caf\ufffd", "rejected"],
        ["f\ufffd", "rejected"],
        ["naïve", "created"],
        ["café-unicode-path", "created"],
      ]);
      const reason = (i: number) => body.results[i].reason as string;
      expect(reason(3)).toMatch(/hidden file/);
      expect(reason(4)).toMatch(/folder/);
      expect(reason(8)).toMatch(/600 characters long, over the limit of 512/);
      expect(reason(9)).toMatch(/"\\"/);
      expect(reason(10)).toMatch(/2 entries named "twice" \(entries #11, #12\).*none was imported/);
      expect(reason(14)).toMatch(/not UTF-8 \(bytes 63 61 66 82; a legacy code page such as CP437\?\)/);
      expect(reason(15)).toMatch(/bytes 63 61 66 83/);
      expect(reason(16)).toMatch(/marked UTF-8 but is not valid UTF-8/);
      expect(body.succeeded).toBe(4);
      expect(await list(n)).toEqual(["café-unicode-path", "naïve", "ok.yaml", "x"]);
      expect((await get(n, "x")).json().data).toBe("legit");
    });

    it("entries with unsupported content get rows too: encrypted, unknown method, not UTF-8, over the content limit; a BOM is kept", async () => {
      const n = ns();
      const entries = [
        { name: "encrypted", data: "x", flags: 0x1 },
        { name: "bzip2", data: "x", method: 12 },
        { name: "binary", data: Buffer.from([0xff, 0xfe, 0x00]) },
        { name: "too-big", data: "y".repeat(TEST_LIMITS.maxContentBytes + 1) },
        { name: "bom", data: "\ufeffkey: value" },
        { name: "stored", data: "no compression", method: 0 },
      ];
      const r = await upload(n, rawZip(entries));
      expect(r.statusCode, r.body).toBe(200);
      expect(r.json().results).toEqual([
        { configId: "encrypted", outcome: "rejected", reason: expect.stringMatching(/encrypted/) },
        { configId: "bzip2", outcome: "rejected", reason: expect.stringMatching(/compression method 12/) },
        { configId: "binary", outcome: "rejected", reason: expect.stringMatching(/not UTF-8 text/) },
        { configId: "too-big", outcome: "rejected", reason: `content is ${TEST_LIMITS.maxContentBytes + 1} bytes, over the limit of ${TEST_LIMITS.maxContentBytes} bytes (gov.limits.config-content)` },
        { configId: "bom", outcome: "created" },
        { configId: "stored", outcome: "created" },
      ]);
      expect(Buffer.from((await get(n, "bom")).json().data).subarray(0, 3)).toEqual(Buffer.from([0xef, 0xbb, 0xbf]));
    });

    it("archives over the entry-count (folders included) or uncompressed-size limit are refused before anything is written, naming the setting", async () => {
      const n = ns();
      const files = Array.from({ length: 12 }, (_, i) => ({ name: `c${i}`, data: "x" }));
      const folders = Array.from({ length: 9 }, (_, i) => ({ name: `d${i}/`, method: 0 }));
      let r = await upload(n, rawZip([...files, ...folders]));
      expect([r.statusCode, r.json().code]).toEqual([413, "resource_exhausted"]);
      expect(r.json().message).toBe("the archive has 21 entries (folders included), over the limit of 20 entries (gov.limits.zip-entries); nothing was imported");
      // Highly compressible: small upload, large inflated size (a zip bomb in miniature).
      const bomb = await zipOf({ "a-first": "ok", big1: "0".repeat(300_000), big2: "0".repeat(300_000) }, { type: "nodebuffer", compression: "DEFLATE" });
      expect(bomb.length).toBeLessThan(TEST_LIMITS.maxZipBytes);
      r = await upload(n, bomb);
      expect([r.statusCode, r.json().code]).toEqual([413, "resource_exhausted"]);
      expect(r.json().message).toMatch(/over the limit of 524288 bytes \(gov\.limits\.zip-uncompressed\); nothing was imported/);
      expect(await list(n)).toEqual([]); // not even "a-first"
    });

    it("an archive whose entries lie (size past the declared one, bad CRC, overlapping data) is refused whole, nothing written", async () => {
      const n = ns();
      const ok = { name: "a-first", data: "ok" };
      for (const [entries, why] of [
        [[ok, { name: "liar", compressed: zeroBomb(8 << 20), declaredSize: 100, crc: 0 }], /entry #2 \("liar"\) inflates to more than the 100 bytes it declares/],
        [[ok, { name: "short", data: "0123456789", declaredSize: 20 }], /entry #2 \("short"\) inflates to 10 bytes, not the 20 it declares/],
        [[ok, { name: "crc", data: "content", crc: 1234 }], /entry #2 \("crc"\) fails its CRC-32 check/],
      ] as const) {
        const r = await upload(n, rawZip([...entries]));
        expect([r.statusCode, r.json().code]).toEqual([400, "invalid_argument"]);
        expect(r.json().message).toMatch(why);
        expect(r.json().message).toMatch(/nothing was imported$/);
      }
      expect(await list(n)).toEqual([]);
    });

    it("an archive sent in base64 in a JSON body is held to gov.limits.zip-upload, as a form's file part is, not to the JSON limit", async () => {
      const n = ns();
      // ~190 KB of archive: over gov.limits.json-body (128 KiB here) as base64, under gov.limits.zip-upload (256 KiB)
      const entries = Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`e${i}.txt`, randomBytes(36 * 1024).toString("base64")]));
      const archive = await zipOf(entries, { type: "nodebuffer", compression: "STORE" });
      expect(archive.length).toBeGreaterThan(128 * 1024);
      const post = (zip: Buffer) =>
        gw.app.inject({ method: "POST", url: `/v1/namespaces/${seg(n)}/configs`, payload: JSON.stringify({ importZip: zip.toString("base64") }), headers: { "content-type": "application/json" } });
      const r = await post(archive);
      expect([r.statusCode, r.json().succeeded]).toEqual([200, 4]);
      // over the upload limit: told the upload's setting
      const tooBig = await post(Buffer.concat([archive, randomBytes(100 * 1024)]));
      expect([tooBig.statusCode, tooBig.json().code]).toEqual([413, "resource_exhausted"]);
      expect(tooBig.json().message).toMatch(/gov\.limits\.zip-upload/);
    });

    it("a non-ZIP upload, a missing file part or an upload over the size limit → 4xx that says which, nothing written", async () => {
      const n = ns();
      let r = await upload(n, Buffer.from("this is not a zip"));
      expect([r.statusCode, r.json().code, r.json().message]).toEqual([400, "invalid_argument", expect.stringContaining("not a readable ZIP")]);
      r = await gw.app.inject({ method: "POST", url: `/v1/namespaces/${seg(n)}/configs`, ...multipart(Buffer.from("x"), {}, "other") });
      expect([r.statusCode, r.json().code]).toEqual([400, "invalid_argument"]);
      expect(r.json().message).toMatch(/no file part named importZip|missing.*importZip/);
      expect(r.json().message).not.toMatch(/is empty/);
      r = await upload(n, Buffer.alloc(TEST_LIMITS.maxZipBytes + 10, 1));
      expect([r.statusCode, r.json().code]).toEqual([413, "resource_exhausted"]);
      expect(r.json().message).toMatch(/gov\.limits\.zip-upload/);
      expect(r.body.length).toBeLessThan(1000); // never echoes the upload
      expect(await list(n)).toEqual([]);
    });

    it("Connect and gRPC answer the same rows and the same limit errors as REST", async () => {
      const urls = await gw.listen();
      const archive = rawZip([
        { name: "one", data: "1" },
        { name: "dup", data: "a" },
        { name: "dup", data: "b" },
        { name: ".hidden", data: "h" },
      ]);
      const rest = (await upload(ns(), archive)).json();
      const tooMany = rawZip(Array.from({ length: 21 }, (_, i) => ({ name: `d${i}/`, method: 0 })));
      for (const { name, client } of configClients(urls)) {
        const res = await client.importConfigs({ namespace: ns(), importZip: archive });
        expect({ total: res.total, succeeded: res.succeeded, results: res.results.map((x) => ({ configId: x.configId, outcome: x.outcome, reason: x.reason })) }, name).toEqual(rest);
        const err = await client.importConfigs({ namespace: ns(), importZip: tooMany }).catch((e: unknown) => ConnectError.from(e));
        expect(err, name).toBeInstanceOf(ConnectError);
        expect([(err as ConnectError).code, (err as ConnectError).rawMessage], name).toEqual([Code.ResourceExhausted, expect.stringContaining("gov.limits.zip-entries")]);
        const empty = await client.importConfigs({ namespace: ns(), importZip: new Uint8Array() }).catch((e: unknown) => ConnectError.from(e));
        expect([(empty as ConnectError).code, (empty as ConnectError).rawMessage], name).toEqual([Code.InvalidArgument, expect.stringContaining("no archive was received")]);
      }
    });
  });
}
