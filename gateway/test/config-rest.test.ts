import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestGateway, ns, seg, storeTargets, type TestGateway } from "./harness.js";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

for (const target of storeTargets()) {
  describe.skipIf(target.skip)(`config REST API on the ${target.name} store`, () => {
    let gw: TestGateway;
    beforeAll(async () => {
      gw = await createTestGateway(await target.open());
    });
    afterAll(async () => gw?.close());

    const req = (method: string, url: string, payload?: string | Buffer, headers: Record<string, string> = {}) =>
      gw.app.inject({ method: method as "GET", url, payload, headers: { "content-type": "text/plain", ...headers } });
    const cfg = (n: string, id: string, rest = "") => `/v1/namespaces/${seg(n)}/configs/${seg(id)}${rest}`;

    it("create → v1 (true), update → v2, identical content → false and no new version", async () => {
      const n = ns();
      let r = await req("PUT", cfg(n, "app.yaml"), "port: 80\n");
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      r = await req("PUT", cfg(n, "app.yaml"), "port: 81\n");
      expect(r.json()).toBe(true);
      r = await req("PUT", cfg(n, "app.yaml"), "port: 81\n");
      expect([r.statusCode, r.json()]).toEqual([200, false]);
      r = await req("GET", cfg(n, "app.yaml"));
      expect(r.statusCode).toBe(200);
      expect(r.headers["content-type"]).toMatch(/application\/json/);
      const body = r.json();
      expect(body).toMatchObject({ configId: "app.yaml", data: "port: 81\n", hash: sha("port: 81\n"), version: 2 });
      // RFC 3339 in UTC as proto JSON writes it: the fraction appears only when the milliseconds are not zero
      // (one write in a thousand lands on a whole second, so the test must accept both).
      expect(body.createTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$/);
      expect(Math.abs(Date.now() - Date.parse(body.createTime))).toBeLessThan(60_000);
      r = await req("GET", `/v1/namespaces/${seg(n)}/configs`);
      expect(r.json()).toEqual(["app.yaml"]);
    });

    it("rollback to 1 → a new v3 with v1's content; versions newest first; one version by number", async () => {
      const n = ns();
      await req("PUT", cfg(n, "r"), "one");
      await req("PUT", cfg(n, "r"), "two");
      let r = await req("PUT", cfg(n, "r", "/to/1"));
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      r = await req("GET", cfg(n, "r"));
      expect(r.json()).toMatchObject({ data: "one", version: 3 });
      r = await req("GET", cfg(n, "r", "/versions"));
      const versions = r.json();
      expect(versions.map((v: { version: number; op: string }) => [v.version, v.op])).toEqual([[2, "rollback"], [1, "set"]]);
      expect(versions[0]).toEqual({ configId: "r", version: 2, op: "rollback", opTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
      r = await req("GET", cfg(n, "r", "/versions/1"));
      expect(r.json()).toMatchObject({ configId: "r", data: "one", version: 1, op: "set", hash: sha("one") });
    });

    it("delete, then rollback restores the config", async () => {
      const n = ns();
      await req("PUT", cfg(n, "d.json"), '{"a":1}', { "content-type": "application/json" });
      let r = await req("DELETE", cfg(n, "d.json"));
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      r = await req("GET", cfg(n, "d.json"));
      expect(r.statusCode).toBe(404);
      expect(r.json()).toEqual({ code: "not_found", message: expect.stringContaining('config "d.json" does not exist') });
      r = await req("PUT", cfg(n, "d.json", "/to/1"));
      expect(r.json()).toBe(true);
      r = await req("GET", cfg(n, "d.json"));
      expect(r.json()).toMatchObject({ data: '{"a":1}', version: 2 });
    });

    it("unknown config, version or rollback target → 404 with the contract's error shape", async () => {
      const n = ns();
      await req("PUT", cfg(n, "x"), "1");
      for (const [method, url] of [
        ["GET", cfg(n, "missing")],
        ["DELETE", cfg(n, "missing")],
        ["GET", cfg(n, "missing", "/versions")],
        ["GET", cfg(n, "x", "/versions/7")],
        ["PUT", cfg(n, "x", "/to/7")],
        ["PUT", cfg(n, "missing", "/to/1")],
      ]) {
        const r = await req(method, url);
        expect([method, url, r.statusCode, r.json().code]).toEqual([method, url, 404, "not_found"]);
      }
      const r = await req("GET", cfg(n, "x", "/versions/abc"));
      expect([r.statusCode, r.json().code]).toEqual([400, "invalid_argument"]);
    });

    it("untagged namespace → 400 explaining the hash-tag rule; {dev} and cosky-{dev} are distinct; encoded braces work", async () => {
      let r = await req("GET", "/v1/namespaces/dev/configs");
      expect(r.statusCode).toBe(400);
      expect(r.json().code).toBe("invalid_argument");
      expect(r.json().message).toMatch(/hash tag.*\{dev\}.*never adds braces/s);
      r = await req("PUT", "/v1/namespaces/dev/configs/a", "x");
      expect(r.statusCode).toBe(400);

      const tag = ns();
      const other = `cosky-${tag}`;
      await req("PUT", `/v1/namespaces/${tag}/configs/a`, "plain braces"); // raw braces in the path
      await req("PUT", `/v1/namespaces/${seg(other)}/configs/a`, "prefixed");
      r = await req("GET", `/v1/namespaces/${seg(tag)}/configs/a`); // percent-encoded: same namespace
      expect(r.json().data).toBe("plain braces");
      r = await req("GET", `/v1/namespaces/${seg(other)}/configs/a`);
      expect(r.json().data).toBe("prefixed");
    });

    it("config ids with ':' and '/' (sent encoded), spaces and unicode work end to end", async () => {
      const n = ns();
      const ids = ["a:b", "dir/app.yaml", "with space.txt", "配置.yaml"];
      for (const id of ids) expect((await req("PUT", cfg(n, id), `content of ${id}`)).json()).toBe(true);
      expect((await req("GET", `/v1/namespaces/${seg(n)}/configs`)).json()).toEqual([...ids].sort());
      for (const id of ids) expect((await req("GET", cfg(n, id))).json().data).toBe(`content of ${id}`);
      expect((await req("DELETE", cfg(n, "dir/app.yaml"))).json()).toBe(true);
    });

    it("a JSON string body is taken as the content; other JSON bodies are the content verbatim", async () => {
      const n = ns();
      await req("PUT", cfg(n, "s"), JSON.stringify("line1\nline2"), { "content-type": "application/json" });
      expect((await req("GET", cfg(n, "s"))).json().data).toBe("line1\nline2");
      await req("PUT", cfg(n, "o"), '{ "k": [1, 2] }', { "content-type": "application/json" });
      expect((await req("GET", cfg(n, "o"))).json().data).toBe('{ "k": [1, 2] }');
    });
  });
}
