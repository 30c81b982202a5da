import { createHash } from "node:crypto";
import { request } from "node:http";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configClients, createTestGateway, ns, seg, storeTargets, type TestGateway } from "./harness.js";

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** A plain HTTP/1.1 request that neither adds Accept-Encoding nor decodes the answer (fetch does both). */
function raw(url: string, method = "GET", headers: Record<string, string> = {}, body?: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
  retry?: string;
  comments: string[];
}

/** An open SSE response, parsed into blocks (events, and comment-only blocks such as heartbeats). */
async function openSse(url: string, headers: Record<string, string> = {}) {
  const ac = new AbortController();
  const res = await fetch(url, { signal: ac.signal, headers });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  const blocks = (): SseEvent[] =>
    text
      .split("\n\n")
      .slice(0, -1)
      .map((block) => {
        const e: SseEvent = { comments: [] };
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) e.comments.push(line.slice(1).trim());
          else {
            const i = line.indexOf(":");
            (e as unknown as Record<string, string>)[line.slice(0, i)] = line.slice(i + 1).replace(/^ /, "");
          }
        }
        return e;
      });
  const events = () => blocks().filter((b) => b.data !== undefined);
  const until = async (done: () => boolean) => {
    while (!done()) {
      const { value, done: ended } = await reader.read();
      if (ended) throw new Error(`stream ended early:\n${text}`);
      text += value;
    }
  };
  return { res, blocks, events, until, close: () => ac.abort(), data: (e: SseEvent) => JSON.parse(e.data!) as { op: string; config?: { data: string; version: number; hash: string } } };
}

for (const target of storeTargets()) {
  describe.skipIf(target.skip)(`HTTP conveniences on the ${target.name} store`, () => {
    let gw: TestGateway;
    let url: { url: string; grpcUrl: string };
    beforeAll(async () => {
      gw = await createTestGateway(await target.open(), undefined, true, { GOV_SSE_HEARTBEAT: "200ms" });
      url = await gw.listen();
    });
    afterAll(async () => gw?.close());
    const configUrl = (n: string, id: string) => `${url.url}/v1/namespaces/${seg(n)}/configs/${seg(id)}`;

    it("a config GET carries ETag = the quoted content hash; If-None-Match answers 304 without a body until it changes", async () => {
      const n = ns("etag");
      const u = configUrl(n, "app.yaml");
      await raw(u, "PUT", {}, "a: 1");
      const first = await raw(u);
      expect(first.status).toBe(200);
      expect(first.headers.etag).toBe(`"${sha256("a: 1")}"`);
      expect(first.headers["cache-control"]).toBe("no-cache");
      const etag = first.headers.etag as string;

      for (const inm of [etag, `W/${etag}`, `"other", ${etag}`, "*"]) {
        const r = await raw(u, "GET", { "If-None-Match": inm });
        expect([inm, r.status, r.body.length, r.headers.etag]).toEqual([inm, 304, 0, etag]);
      }
      expect((await raw(u, "GET", { "If-None-Match": '"other"' })).status).toBe(200);
      const head = await raw(u, "HEAD", { "If-None-Match": etag });
      expect([head.status, head.body.length]).toEqual([304, 0]);

      await raw(u, "PUT", {}, "a: 2");
      const changed = await raw(u, "GET", { "If-None-Match": etag });
      expect(changed.status).toBe(200);
      expect(changed.headers.etag).toBe(`"${sha256("a: 2")}"`);
      expect(JSON.parse(changed.body.toString())).toMatchObject({ data: "a: 2", version: 2 });
      // Answers that carry no content hash (a list) get no ETag.
      expect((await raw(`${url.url}/v1/namespaces/${seg(n)}/configs`)).headers.etag).toBeUndefined();
    });

    it("HEAD answers like GET without a body: a config, a missing config, the export", async () => {
      const n = ns("head");
      const u = configUrl(n, "h.yaml");
      await raw(u, "PUT", {}, "x");
      const get = await raw(u);
      const head = await raw(u, "HEAD");
      expect([head.status, head.body.length, head.headers["content-type"], head.headers.etag]).toEqual([200, 0, get.headers["content-type"], get.headers.etag]);
      expect((await raw(configUrl(n, "missing"), "HEAD")).status).toBe(404);
      const exp = await raw(`${url.url}/v1/namespaces/${seg(n)}/configs/export`, "HEAD");
      expect([exp.status, exp.body.length, exp.headers["content-type"]]).toEqual([200, 0, "application/zip"]);
      expect(exp.headers["content-disposition"]).toMatch(/^attachment; filename=".*_configs_\d+\.zip"/);
    });

    it("HEAD of a watch answers the event-stream headers at once and ends; a refused one its 4xx", async () => {
      const n = ns("headwatch");
      const r = await raw(`${configUrl(n, "w.yaml")}/watch`, "HEAD");
      expect([r.status, r.body.length, r.headers["content-type"]]).toEqual([200, 0, "text/event-stream; charset=utf-8"]);
      expect((await raw(`${url.url}/v1/namespaces/dev/configs/w.yaml/watch`, "HEAD")).status).toBe(400);
    });

    it("large REST answers are compressed when the client accepts it, small ones and event streams never", async () => {
      const n = ns("gzip");
      const big = "line of config text\n".repeat(500); // 10 KB
      await raw(configUrl(n, "big.txt"), "PUT", {}, big);
      await raw(configUrl(n, "small.txt"), "PUT", {}, "tiny");
      const plain = await raw(configUrl(n, "big.txt"));
      expect(plain.headers["content-encoding"]).toBeUndefined();
      expect(plain.headers.vary).toBe("Accept-Encoding");
      const gz = await raw(configUrl(n, "big.txt"), "GET", { "Accept-Encoding": "gzip" });
      expect(gz.headers["content-encoding"]).toBe("gzip");
      expect(gunzipSync(gz.body).equals(plain.body)).toBe(true);
      expect(gz.body.length).toBeLessThan(plain.body.length / 10);
      const br = await raw(configUrl(n, "big.txt"), "GET", { "Accept-Encoding": "gzip, br" });
      expect(br.headers["content-encoding"]).toBe("br");
      expect(brotliDecompressSync(br.body).equals(plain.body)).toBe(true);
      expect((await raw(configUrl(n, "big.txt"), "GET", { "Accept-Encoding": "br;q=0, gzip;q=0" })).headers["content-encoding"]).toBeUndefined();
      expect((await raw(configUrl(n, "small.txt"), "GET", { "Accept-Encoding": "gzip, br" })).headers["content-encoding"]).toBeUndefined();
      // Twice: the second answer may come from the per-record cache and must be the same.
      expect((await raw(configUrl(n, "big.txt"), "GET", { "Accept-Encoding": "br" })).body.equals(br.body)).toBe(true);

      const sse = await openSse(`${configUrl(n, "big.txt")}/watch`, { "Accept-Encoding": "gzip, br" });
      expect(sse.res.headers.get("content-encoding")).toBeNull();
      await sse.until(() => sse.events().length === 1);
      expect(sse.data(sse.events()[0]).config?.data).toBe(big);
      sse.close();
    });

    it("SSE: retry, an id per event (the content hash; empty once removed), heartbeats while idle", async () => {
      const n = ns("sse");
      const u = configUrl(n, "s.yaml");
      await raw(u, "PUT", {}, "one");
      const sse = await openSse(`${u}/watch`);
      await sse.until(() => sse.events().length === 1);
      expect(sse.blocks()[0]).toMatchObject({ retry: "3000" });
      await raw(u, "PUT", {}, "two");
      await raw(u, "DELETE");
      await sse.until(() => sse.events().length === 3);
      expect(sse.events().map((e) => [e.id, sse.data(e).op])).toEqual([
        [sha256("one"), "current"],
        [sha256("two"), "set"],
        ["", "remove"],
      ]);
      // gov.sse.heartbeat is 200 ms here
      await sse.until(() => sse.blocks().some((b) => b.comments.includes("heartbeat")));
      sse.close();
    });

    it("SSE: reconnecting with Last-Event-ID of the current state skips it; any other id gets it", async () => {
      const n = ns("resume");
      const u = configUrl(n, "r.yaml");
      await raw(u, "PUT", {}, "one");
      const same = await openSse(`${u}/watch`, { "Last-Event-ID": sha256("one") });
      const stale = await openSse(`${u}/watch`, { "Last-Event-ID": sha256("older") });
      await stale.until(() => stale.events().length === 1);
      expect(stale.data(stale.events()[0])).toMatchObject({ op: "current", config: { data: "one" } });
      await same.until(() => same.blocks().length >= 1); // the retry/connected block: the stream is open
      await raw(u, "PUT", {}, "two");
      await same.until(() => same.events().length === 1);
      expect([same.events()[0].id, same.data(same.events()[0]).op]).toEqual([sha256("two"), "set"]);
      same.close();
      stale.close();
    });

    it("a Connect client watches the same way: the state, then each change", async () => {
      const [{ client }] = configClients(url);
      const n = ns("cw");
      await client.setConfig({ namespace: n, configId: "c", data: "first" });
      const ac = new AbortController();
      const seen: [string, string | undefined][] = [];
      const done = (async () => {
        for await (const ev of client.watchConfig({ namespace: n, configId: "c" }, { signal: ac.signal })) seen.push([ev.op, ev.config?.hash]);
      })().catch(() => {});
      await expect.poll(() => seen.length).toBe(1);
      await client.setConfig({ namespace: n, configId: "c", data: "second" });
      await expect.poll(() => seen.length).toBe(2);
      ac.abort();
      await done;
      expect(seen).toEqual([
        ["current", sha256("first")],
        ["set", sha256("second")],
      ]);
    });
  });
}
