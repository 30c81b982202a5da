import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RegistryStore } from "../src/store/registry-store.js";
import { createRegistryGateway, ns, seg, storeTargets, type RegistryGateway } from "./harness.js";

for (const target of storeTargets()) {
  describe.skipIf(target.skip)(`registry REST API on the ${target.name} store`, () => {
    let gw: RegistryGateway;
    let store: RegistryStore;
    beforeAll(async () => {
      gw = await createRegistryGateway((store = await target.open()));
    });
    afterAll(async () => gw?.close());

    const req = (method: string, url: string, body?: unknown) =>
      gw.proc.http.inject({
        method: method as "GET",
        url,
        ...(body === undefined ? {} : { payload: typeof body === "string" ? body : JSON.stringify(body), headers: { "content-type": "application/json" } }),
      });
    const svc = (n: string, serviceId = "", rest = "") => `/v1/namespaces/${seg(n)}/services${serviceId ? `/${seg(serviceId)}` : ""}${rest}`;
    const inst = (n: string, serviceId: string, instanceId: string, rest = "") => svc(n, serviceId, `/instances/${seg(instanceId)}${rest}`);

    it("register → true; list instances in the contract's JSON; services and stats; deregister with %23 in the path", async () => {
      const n = ns();
      let r = await req("PUT", svc(n, "order", "/instances"), { schema: "http", host: "10.0.0.1", port: 8080, metadata: { zone: "a" } });
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      r = await req("PUT", svc(n, "order", "/instances"), { schema: "https", host: "10.0.0.2", port: 8443, weight: 3, isEphemeral: false });
      expect(r.json()).toBe(true);
      r = await req("GET", svc(n, "order", "/instances"));
      expect(r.statusCode).toBe(200);
      const [a, b] = r.json();
      expect(a).toEqual({
        instanceId: "order@http#10.0.0.1#8080",
        serviceId: "order",
        schema: "http",
        host: "10.0.0.1",
        port: 8080,
        weight: 1,
        isEphemeral: true,
        ttlAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
        metadata: { zone: "a" },
        isExpired: false,
      });
      // default ttl 60 s
      expect(Date.parse(a.ttlAt) - Date.now()).toBeGreaterThan(55_000);
      expect(b).toEqual({ instanceId: "order@https#10.0.0.2#8443", serviceId: "order", schema: "https", host: "10.0.0.2", port: 8443, weight: 3, isEphemeral: false, metadata: {}, isExpired: false });
      expect((await req("GET", svc(n))).json()).toEqual(["order"]);
      // service stats are the counts of the last sweep (the stats worker's): none yet, then this one
      expect((await req("GET", svc(n, "", "/stats"))).json()).toEqual([{ serviceId: "order", instanceCount: 0 }]);
      await store.sweep(n, Date.now());
      expect((await req("GET", svc(n, "", "/stats"))).json()).toEqual([{ serviceId: "order", instanceCount: 2 }]);

      expect(inst(n, "order", a.instanceId)).toContain("order%40http%2310.0.0.1%238080");
      r = await req("DELETE", inst(n, "order", a.instanceId));
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      // '@' may be sent raw; '#' must be %23
      r = await req("DELETE", `${svc(n, "order")}/instances/order@https%2310.0.0.2%238443`);
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      r = await req("DELETE", inst(n, "order", a.instanceId));
      expect(r.statusCode).toBe(404);
      expect(r.json()).toEqual({ code: "not_found", message: expect.stringContaining("register it again") });
      expect((await req("GET", svc(n, "order", "/instances"))).json()).toEqual([]);
    });

    it("a raw '#' (cut off by the client as a fragment) gets a 400 that says to send %23", async () => {
      const n = ns();
      const r = await req("DELETE", `${svc(n, "order")}/instances/order@http`);
      expect(r.statusCode).toBe(400);
      expect(r.json().message).toContain("%23");
      // renew and metadata cut the same way arrive as a PUT on the instance's own path, which takes DELETE only
      for (const method of ["PUT", "PATCH"]) {
        const cut = await req(method, `${svc(n, "order")}/instances/order@http`);
        expect(cut.statusCode).toBe(405);
        expect(cut.json().message).toMatch(/^[A-Z]+ is not allowed on .*: use DELETE/);
        if (method === "PUT") expect(cut.json().message).toContain('if the URL held a "#", everything from it on was not sent (a client cuts a URL there): send # as %23');
        else expect(cut.json().message).not.toContain("%23"); // no PATCH route lies under it
      }
      // a wrong method on a collection was not cut inside an id: no word about "#"
      const collection = await req("DELETE", `${svc(n, "order")}/instances`);
      expect([collection.statusCode, collection.json().message]).toEqual([405, expect.not.stringContaining("%23")]);
    });

    it("renew → true with the ttl extended; unknown → 404; metadata replace and {} clears", async () => {
      const n = ns();
      await req("PUT", svc(n, "s", "/instances"), { schema: "grpc", host: "h", port: 9000, ttl: "30s", metadata: { a: "1" } });
      const id = "s@grpc#h#9000";
      let r = await req("PUT", inst(n, "s", id, "/renew"));
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      const ttlAt = Date.parse((await req("GET", svc(n, "s", "/instances"))).json()[0].ttlAt);
      expect(ttlAt - Date.now()).toBeGreaterThan(25_000);
      expect(ttlAt - Date.now()).toBeLessThanOrEqual(30_000);
      r = await req("PUT", inst(n, "s", "s@grpc#h#9001", "/renew"));
      expect([r.statusCode, r.json().code]).toEqual([404, "not_found"]);

      // The body is the map itself (the seed's and CoSky's shape).
      r = await req("PUT", inst(n, "s", id, "/metadata"), { b: "2", c: "3", metadata: "a key like any other" });
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      expect((await req("GET", svc(n, "s", "/instances"))).json()[0].metadata).toEqual({ b: "2", c: "3", metadata: "a key like any other" });
      r = await req("PUT", inst(n, "s", id, "/metadata"), {});
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      expect((await req("GET", svc(n, "s", "/instances"))).json()[0].metadata).toEqual({});
      r = await req("PUT", inst(n, "s", "s@grpc#h#1", "/metadata"), { a: "b" });
      expect([r.statusCode, r.json().code]).toEqual([404, "not_found"]);
    });

    it("metadata bodies that are not a map of strings → 400 that says how to fix it; nothing changes", async () => {
      const n = ns();
      await req("PUT", svc(n, "s", "/instances"), { schema: "http", host: "h", port: 1, metadata: { keep: "me" } });
      const url = inst(n, "s", "s@http#h#1", "/metadata");
      const cases: [unknown, RegExp][] = [
        [{ port: 81 }, /value of "port" is a number: metadata values are strings, so quote it \("port": "…"\)/],
        [{ on: true }, /value of "on" is a boolean: .*quote it/],
        [{ gone: null }, /value of "gone" is null/],
        // sent wrapped, as in a whole-message body: told so, not to quote the map
        [{ metadata: { zone: "b" } }, /^the request body is the metadata map itself, not an object holding it: send \{"zone": "b"\}, not \{"metadata": \{\.\.\.\}\}$/],
        [{ metadata: { zone: "a" }, rack: "7" }, /value of "metadata" is an object: .*The body is the metadata map itself, e.g. \{"zone": "a"\}/],
        [["zone", "a"], /the request body is an array: the body is the metadata map itself, \{"key": "value"\}/],
        ['"zone=a"', /the request body is a string/],
        ["{not json", /not valid JSON .*send the metadata map as \{"key": "value"\}/],
        [{ _sys: "x" }, /"_sys" starts with "_", which is reserved/],
      ];
      for (const [body, message] of cases) {
        const r = await req("PUT", url, body);
        expect([JSON.stringify(body), r.statusCode, r.json().code]).toEqual([JSON.stringify(body), 400, "invalid_argument"]);
        expect(r.json().message).toMatch(message);
      }
      const empty = await gw.proc.http.inject({ method: "PUT", url, headers: { "content-type": "application/json" } });
      expect([empty.statusCode, empty.json().message]).toEqual([400, expect.stringMatching(/the request body is the metadata map itself, as JSON: send \{"key": "value"\} \(\{\} for none\)/)]);
      expect((await req("GET", svc(n, "s", "/instances"))).json()[0].metadata).toEqual({ keep: "me" });
    });

    it("put service → true then false; delete refuses (412) while live instances remain; unknown → 404", async () => {
      const n = ns();
      let r = await req("PUT", svc(n, "pay"));
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      expect((await req("PUT", svc(n, "pay"))).json()).toBe(false);
      await req("PUT", svc(n, "pay", "/instances"), { schema: "http", host: "h", port: 1 });
      r = await req("DELETE", svc(n, "pay"));
      expect(r.statusCode).toBe(412);
      expect(r.json()).toEqual({ code: "failed_precondition", message: expect.stringContaining("deregister them first") });
      await req("DELETE", inst(n, "pay", "pay@http#h#1"));
      r = await req("DELETE", svc(n, "pay"));
      expect([r.statusCode, r.json()]).toEqual([200, true]);
      r = await req("DELETE", svc(n, "pay"));
      expect([r.statusCode, r.json().code]).toEqual([404, "not_found"]);
    });

    it("lb picks a live instance of weight > 0; none → 404", async () => {
      const n = ns();
      let r = await req("GET", svc(n, "lb", "/lb"));
      expect([r.statusCode, r.json().code]).toEqual([404, "not_found"]);
      await req("PUT", svc(n, "lb", "/instances"), { schema: "http", host: "zero", port: 1, weight: 0 });
      r = await req("GET", svc(n, "lb", "/lb"));
      expect(r.statusCode).toBe(404);
      await req("PUT", svc(n, "lb", "/instances"), { schema: "http", host: "one", port: 1, weight: 1 });
      for (let i = 0; i < 20; i++) {
        r = await req("GET", svc(n, "lb", "/lb"));
        expect([r.statusCode, r.json().host]).toEqual([200, "one"]);
      }
    });

    it("an instance with a 1 s ttl disappears from every read without renewal", async () => {
      const n = ns();
      await req("PUT", svc(n, "t", "/instances"), { schema: "http", host: "h", port: 1, ttl: "1s" });
      expect((await req("GET", svc(n, "t", "/instances"))).json()).toHaveLength(1);
      await store.sweep(n, Date.now());
      expect((await req("GET", svc(n, "", "/stats"))).json()).toEqual([{ serviceId: "t", instanceCount: 1 }]);
      await expect.poll(async () => (await req("GET", svc(n, "t", "/instances"))).json(), { timeout: 3000, interval: 50 }).toEqual([]);
      await store.sweep(n, Date.now());
      expect((await req("GET", svc(n, "", "/stats"))).json()).toEqual([{ serviceId: "t", instanceCount: 0 }]);
      expect((await req("GET", svc(n, "t", "/lb"))).statusCode).toBe(404);
      expect((await req("PUT", inst(n, "t", "t@http#h#1", "/renew"))).statusCode).toBe(404);
    });

    it("bad input → 400 with a message that says how to fix it, never 500", async () => {
      const n = ns();
      const cases: [unknown, RegExp][] = [
        [{ schema: "http", host: "h", port: 0 }, /^port is missing \(or 0\): give the instance's port, 1 to 65535$/],
        [{ schema: "http", host: "h", port: -1 }, /port -1 is out of range.*1 to 65535/],
        [{ schema: "http", host: "h", port: 70000 }, /port 70000 is out of range/],
        [{ schema: "http", host: "h", port: 1, weight: -1 }, /weight -1 .*0 or more/],
        [{ schema: "http", host: "h", port: 1, weight: 1.5 }, /weight/],
        [{ schema: "http", port: 1 }, /host is required/],
        [{ host: "h", port: 1 }, /schema is required/],
        [{ schema: "http", host: "h" }, /^port is missing \(or 0\): give the instance's port, 1 to 65535$/],
        [{ schema: "http", host: "h", port: 1, metadata: { n: 1 } }, /metadata|string/i],
        [{ schema: "http", host: "h", port: 1, metadata: { _sys: "x" } }, /"_sys" starts with "_", which is reserved/],
        [{ schema: "http", host: "h", port: 1, colour: "red" }, /key "colour" is unknown: RegisterInstanceRequest has .*schema, host, port/],
        [{ schema: "http", host: "h", port: 1, ttl: "1m" }, /Duration .*: write a duration as seconds with an "s", e\.g\. "30s"/],
        [{ schema: "http", host: "h", port: "eighty" }, /port/],
        [{ schema: "http", host: "a#b", port: 1 }, /host .*"#"/],
        [{ schema: "ht tp", host: "h", port: 1 }, /URI scheme/],
        [{ schema: "http", host: "h", port: 1, ttl: "0.5s" }, /ttl .*out of range/],
        [{ schema: "http", host: "h", port: 1, ttl: "999999999999s" }, /too long for a duration, which holds at most 315576000000s/],
        [{ schema: "http", host: "h", port: 1, ttl: "10s", isEphemeral: false }, /fixed instance .*never expires/],
        ["not json", /not valid JSON/],
        [[1, 2], /RegisterInstanceRequest.*: send a JSON object with RegisterInstanceRequest's fields \(.*schema, host, port/],
        [null, /: send a JSON object with RegisterInstanceRequest's fields/],
        [{ schema: "http", host: "h", port: 1, ttl: "1.0000000001s" }, /more than 9 digits after its decimal point .*: write at most 9, e\.g\. "1\.5s"$/],
        [{ schema: "http", host: "h", port: 1, serviceId: "other" }, /serviceId is given by the path \("bad"\) and the body says otherwise/],
        [{ schema: "http", host: "h", port: 1, metadata: { __proto__x: "fine", ["__proto__"]: "lost" } }, /__proto__/],
      ];
      for (const [body, message] of cases) {
        const r = await req("PUT", svc(n, "bad", "/instances"), body);
        expect([JSON.stringify(body), r.statusCode, r.json().code]).toEqual([JSON.stringify(body), 400, "invalid_argument"]);
        expect(r.json().message).toMatch(message);
      }
      let r = await req("PUT", svc(n, "stats"));
      expect([r.statusCode, r.json().message]).toEqual([400, expect.stringContaining("reserved")]);
      r = await req("PUT", svc(n, "watch", "/instances"), { schema: "http", host: "h", port: 1 });
      expect([r.statusCode, r.json().message]).toEqual([400, expect.stringContaining("reserved")]);
      r = await req("PUT", svc(n, "__proto__", "/instances"), { schema: "http", host: "h", port: 1 });
      expect([r.statusCode, r.json().message]).toEqual([400, expect.stringContaining("reserved")]);
      r = await req("PUT", svc(n, "a#b"));
      expect(r.statusCode).toBe(400);
      for (const id of [" ", " order", "order "]) {
        r = await req("PUT", svc(n, id));
        expect([r.statusCode, r.json().message], JSON.stringify(id)).toEqual([400, `serviceId ${JSON.stringify(id)} starts or ends with a space: remove it`]);
      }
      r = await req("GET", svc("dev", "x", "/instances"));
      expect([r.statusCode, r.json().message]).toEqual([400, expect.stringContaining("hash tag")]);
      r = await req("DELETE", inst(n, "order", "payment@http#h#1"));
      expect([r.statusCode, r.json().message]).toEqual([400, expect.stringContaining("does not belong to service")]);
      expect((await req("GET", svc(n))).json()).toEqual([]); // nothing was created by the refused calls
    });

    it("a service id that shows as another (an invisible or bidirectional character, or not in NFC) is refused when created; an existing one is still served", async () => {
      const n = ns();
      const invisible: [string, string][] = [
        ["order\u200b", "U+200B"], // zero-width space: shows as "order"
        ["\u202eredro", "U+202E"], // right-to-left override: shows as "order"
        ["or\u00adder", "U+00AD"], // soft hyphen
        ["ord\u2060er", "U+2060"], // word joiner
      ];
      for (const [id, hidden] of invisible) {
        for (const r of [await req("PUT", svc(n, id)), await req("PUT", svc(n, id, "/instances"), { schema: "http", host: "h", port: 1 })]) {
          expect([r.statusCode, r.json().code, r.json().message], JSON.stringify(id)).toEqual([400, "invalid_argument", expect.stringContaining(`contains ${hidden}, a character that does not show`)]);
        }
      }
      const decomposed = "cafe\u0301"; // shows as "café" (U+00E9)
      const r = await req("PUT", svc(n, decomposed, "/instances"), { schema: "http", host: "h", port: 1 });
      expect([r.statusCode, r.json().message]).toEqual([400, `serviceId ${JSON.stringify(decomposed)} is not in composed Unicode form (NFC): it shows the same as "café", which would be another service; send that`]);
      expect((await req("GET", svc(n))).json()).toEqual([]);
      // the composed name, and names that merely are not ASCII, are fine; an emoji's joiner shows as part of it
      for (const id of ["café", "заказ", "注文", "👩‍💻-jobs"]) expect((await req("PUT", svc(n, id, "/instances"), { schema: "http", host: "h", port: 1 })).statusCode, id).toBe(200);
      // a service created before the rule (written to the store directly) is still listed, chosen, renewed and removed
      const old = "legacy\u200b";
      const oldId = `${old}@http#h#1`;
      await store.register(n, { instanceId: oldId, serviceId: old, schema: "http", host: "h", port: 1, weight: 1, isEphemeral: true, ttlAt: Date.now() + 60_000, ttlMs: 60_000, metadata: {} }, Date.now());
      expect((await req("GET", svc(n, old, "/lb"))).json().instanceId).toBe(oldId);
      expect((await req("PUT", inst(n, old, oldId, "/renew"))).json()).toBe(true);
      expect((await req("DELETE", inst(n, old, oldId))).json()).toBe(true);
      expect((await req("DELETE", svc(n, old))).json()).toBe(true);
    });
  });
}
