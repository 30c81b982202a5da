import { readSse } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespaceProcess, freshSystem, namespaceTargets, ns, seg, type NamespaceProcess } from "./namespace-harness.js";
import { FAST } from "./stats-harness.js";

const NS = "/v1/namespaces";

for (const target of namespaceTargets()) {
  describe.skipIf(target.skip)(`namespaces REST API on the ${target.name} store`, () => {
    let p: NamespaceProcess;
    beforeAll(async () => {
      p = await createNamespaceProcess(target.env);
    });
    afterAll(async () => p?.close());

    const req = async (method: string, url: string, payload?: unknown) => {
      const res = await p.proc.http.inject({
        method: method as "GET",
        url,
        ...(payload === undefined ? {} : typeof payload === "string" ? { payload, headers: { "content-type": "text/plain" } } : { payload: payload as object }),
      });
      return { status: res.statusCode, json: () => JSON.parse(res.body) as unknown, body: res.body };
    };
    const list = async () => (await req("GET", NS)).json() as string[];

    it("the system namespace is listed and current from the start; current is a JSON string", async () => {
      const res = await req("GET", NS);
      expect(res.status).toBe(200);
      expect(res.json()).toEqual([p.system]);
      const current = await req("GET", `${NS}/current`);
      expect([current.status, current.body]).toEqual([200, JSON.stringify(p.system)]);
    });

    it("create: true, then false; listed sorted; %7B…%7D and raw braces are the same name", async () => {
      const [b, a] = [ns("b-"), ns("a-")];
      expect((await req("PUT", `${NS}/${seg(b)}`)).json()).toBe(true);
      expect((await req("PUT", `${NS}/${b}`)).json()).toBe(false);
      expect((await req("PUT", `${NS}/${seg(a)}`)).json()).toBe(true);
      const all = await list();
      expect(all).toEqual([...all].sort());
      expect(all).toEqual(expect.arrayContaining([a, b, p.system]));
    });

    it("set current: true; every later GET answers it; deleting it makes the system namespace current again", async () => {
      const n = ns();
      expect((await req("PUT", `${NS}/current/${seg(n)}`)).json()).toBe(true);
      expect((await req("GET", `${NS}/current`)).json()).toBe(n);
      expect(await list()).toContain(n); // setting it indexes it
      expect((await req("DELETE", `${NS}/${seg(n)}`)).json()).toBe(true);
      expect((await req("GET", `${NS}/current`)).json()).toBe(p.system);
    });

    it("every namespace that receives a config (set, import) or a service (put, register) is indexed", async () => {
      const [c, s, r] = [ns("c-"), ns("s-"), ns("r-")];
      expect((await req("PUT", `${NS}/${seg(c)}/configs/app.yaml`, "a: 1")).json()).toBe(true);
      expect((await req("PUT", `${NS}/${seg(s)}/services/order`)).json()).toBe(true);
      expect((await req("PUT", `${NS}/${seg(r)}/services/pay/instances`, { schema: "http", host: "10.0.0.1", port: 80 })).json()).toBe(true);
      expect(await list()).toEqual(expect.arrayContaining([c, s, r]));
    });

    it("the hash-tag rule on every namespace value: 400 invalid_argument explaining it; nothing is created", async () => {
      for (const [method, url] of [
        ["PUT", `${NS}/dev`],
        ["PUT", `${NS}/current/dev`],
        ["DELETE", `${NS}/dev`],
        ["PUT", `${NS}/${seg("{}")}`],
      ]) {
        const res = await req(method, url);
        expect([method, url, res.status]).toEqual([method, url, 400]);
        expect(res.json()).toEqual({ code: "invalid_argument", message: expect.stringMatching(/hash tag/) });
      }
      expect(await list()).not.toContain("dev");
      // encoded twice: "%257Bdev%257D" decodes to "%7Bdev%7D", which must not be told to become "{%7Bdev%7D}"
      const twice = await req("PUT", `${NS}/%257Bdev%257D`);
      expect([twice.status, (twice.json() as { message: string }).message]).toEqual([400, expect.stringContaining("percent-encoded twice")]);
    });

    it("the literal `current` is the current-namespace resource, never a namespace", async () => {
      expect((await req("GET", `${NS}/current`)).status).toBe(200);
      const put = await req("PUT", `${NS}/current`); // PUT /v1/namespaces/{namespace} with "current": the name was left out
      expect([put.status, (put.json() as { message: string }).message]).toEqual([400, expect.stringContaining("PUT /v1/namespaces/current/{namespace}")]);
      expect((await req("DELETE", `${NS}/current`)).status).toBe(400);
      expect((await req("GET", `${NS}/current/configs`)).status).toBe(400); // a namespace "current" has no hash tag
      const tagged = ns("current-");
      expect((await req("PUT", `${NS}/${seg(tagged)}`)).json()).toBe(true);
    });

    it("delete refuses (412) while configs or services remain; force removes everything", async () => {
      const n = ns();
      await req("PUT", `${NS}/${seg(n)}/configs/app.yaml`, "v: 1");
      await req("PUT", `${NS}/${seg(n)}/configs/app.yaml`, "v: 2");
      await req("PUT", `${NS}/${seg(n)}/services/order/instances`, { schema: "http", host: "10.0.0.1", port: 80 });
      const refused = await req("DELETE", `${NS}/${seg(n)}`);
      expect(refused.status).toBe(412);
      expect(refused.json()).toEqual({ code: "failed_precondition", message: expect.stringMatching(/1 config\(s\) and 1 service\(s\).*force=true/) });
      expect(await list()).toContain(n);
      expect((await req("GET", `${NS}/${seg(n)}/configs/app.yaml`)).status).toBe(200);
      // force is a query parameter: in a body (which this route does not take) it is refused, not dropped for a 412
      const inBody = await req("DELETE", `${NS}/${seg(n)}`, { force: true });
      expect([inBody.status, (inBody.json() as { message: string }).message]).toEqual([400, expect.stringMatching(/takes no body: its fields come from the path and the query string \(force\); send the request without one$/)]);

      const forced = await req("DELETE", `${NS}/${seg(n)}?force=true`);
      expect([forced.status, forced.json()]).toEqual([200, true]);
      expect(await list()).not.toContain(n);
      expect((await req("GET", `${NS}/${seg(n)}/configs/app.yaml`)).status).toBe(404);
      expect((await req("GET", `${NS}/${seg(n)}/configs/app.yaml/versions`)).status).toBe(404);
      expect((await req("PUT", `${NS}/${seg(n)}/configs/app.yaml/to/1`)).status).toBe(404); // history gone too
      expect((await req("GET", `${NS}/${seg(n)}/configs`)).json()).toEqual([]);
      expect((await req("GET", `${NS}/${seg(n)}/services`)).json()).toEqual([]);
      expect((await req("GET", `${NS}/${seg(n)}/services/order/instances`)).json()).toEqual([]);
      expect((await req("DELETE", `${NS}/${seg(n)}`)).status).toBe(404); // gone
    });

    it("an emptied namespace deletes without force, and takes the history of its deleted configs with it", async () => {
      const n = ns();
      await req("PUT", `${NS}/${seg(n)}/configs/app.yaml`, "v: 1");
      await req("DELETE", `${NS}/${seg(n)}/configs/app.yaml`);
      await req("PUT", `${NS}/${seg(n)}/services/empty`);
      await req("DELETE", `${NS}/${seg(n)}/services/empty`);
      expect((await req("DELETE", `${NS}/${seg(n)}`)).json()).toBe(true);
      expect((await req("PUT", `${NS}/${seg(n)}/configs/app.yaml/to/1`)).status).toBe(404);
    });

    it("a watch of a config whose namespace was deleted shows it made again, though its versions count from 1 again", async () => {
      const n = ns("rewatch-");
      for (let i = 1; i <= 3; i++) expect((await req("PUT", `${NS}/${seg(n)}/configs/app`, `v: ${i}`)).json()).toBe(true);
      const { url } = await p.listen();
      const events: { op: string; config?: { version: number; data: string } }[] = [];
      const ac = new AbortController();
      try {
        await readSse(`${url}${NS}/${seg(n)}/configs/app/watch`, ac.signal, (data) => events.push(data as never));
        await expect.poll(() => events.length).toBe(1);
        expect((await req("DELETE", `${NS}/${seg(n)}?force=true`)).json()).toBe(true);
        await expect.poll(() => events.map((e) => e.op)).toEqual(["current", "remove"]);
        expect((await req("PUT", `${NS}/${seg(n)}/configs/app`, "again: 1")).json()).toBe(true); // version 1 again
        expect((await req("PUT", `${NS}/${seg(n)}/configs/app`, "again: 2")).json()).toBe(true);
        // both were dropped as "already seen" (versions 1 and 2, at or below the 3 shown before)
        await expect.poll(() => events.slice(2).map((e) => [e.op, e.config?.version, e.config?.data]), { timeout: 5_000 }).toEqual([
          ["set", 1, "again: 1"],
          ["set", 2, "again: 2"],
        ]);
      } finally {
        ac.abort();
      }
    });

    it("the system namespace cannot be deleted, even with force; an unknown namespace is 404", async () => {
      for (const url of [`${NS}/${seg(p.system)}`, `${NS}/${seg(p.system)}?force=true`]) {
        const res = await req("DELETE", url);
        expect(res.status).toBe(412);
        expect(res.json()).toEqual({ code: "failed_precondition", message: expect.stringMatching(/system namespace.*cannot be deleted/) });
      }
      expect(await list()).toContain(p.system);
      const unknown = await req("DELETE", `${NS}/${seg(ns())}`);
      expect([unknown.status, (unknown.json() as { code: string }).code]).toEqual([404, "not_found"]);
    });

    it("a bad force value is 400, not a delete", async () => {
      const n = ns();
      await req("PUT", `${NS}/${seg(n)}/configs/a`, "x");
      const res = await req("DELETE", `${NS}/${seg(n)}?force=maybe`);
      expect(res.status).toBe(400);
      expect((await req("GET", `${NS}/${seg(n)}/configs/a`)).status).toBe(200);
    });
  });
}

for (const target of namespaceTargets()) {
  describe.skipIf(target.skip)(`a deleted namespace's stat on the ${target.name} store`, () => {
    let p: NamespaceProcess;
    beforeAll(async () => {
      p = await createNamespaceProcess(target.env, freshSystem(), FAST); // the statistics job runs every 300 ms
    });
    afterAll(async () => p?.close());
    const req = (method: string, url: string, payload?: string) =>
      p.proc.http.inject({ method: method as "GET", url, ...(payload === undefined ? {} : { payload, headers: { "content-type": "text/plain" } }) });
    // its own counts zero; `namespaces` is the server's (the system namespace at least)
    const zeros = { namespaces: expect.any(Number), services: { total: 0, health: 0 }, instances: 0, configs: 0 };

    it("reads zeros as soon as a forced delete answers, not a period later; so does the namespace created again", async () => {
      const n = ns("st");
      expect((await req("PUT", `${NS}/${seg(n)}/configs/a`, "x")).statusCode).toBe(200);
      await expect.poll(async () => (await req("GET", `${NS}/${seg(n)}/stat`)).json().configs, { timeout: 10_000, interval: 50 }).toBe(1);
      expect((await req("DELETE", `${NS}/${seg(n)}?force=true`)).json()).toBe(true);
      expect((await req("GET", `${NS}/${seg(n)}/stat`)).json()).toEqual(zeros);
      expect((await req("PUT", `${NS}/${seg(n)}`)).json()).toBe(true);
      expect((await req("GET", `${NS}/${seg(n)}/stat`)).json()).toEqual(zeros);
    });
  });
}
