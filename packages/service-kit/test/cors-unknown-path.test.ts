/**
 * With gov.cors.origins set, @fastify/cors answers preflights through an `OPTIONS *` route. That route matches every
 * path, so the 405 refuser took every path for a known one: an unknown path answered 405 "GET is not allowed on /x:
 * use OPTIONS" instead of 404 not_found, and the Allow of a known path listed OPTIONS. A preflight route makes no
 * path known.
 */
import { fastify, type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerCors, wrongMethodRefuser } from "../src/index.js";

describe("wrong-method refusals with CORS on", () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = fastify() as unknown as FastifyInstance;
    const refuseWrongMethod = wrongMethodRefuser(app); // before the routes, as every listener installs it
    await registerCors(app, ["http://app.example"]);
    app.get("/known", async () => "ok");
    app.setNotFoundHandler((req, reply) => {
      if (refuseWrongMethod(req, reply)) return;
      void reply.status(404).send({ code: "not_found", message: "no endpoint" });
    });
    await app.ready();
  });
  afterAll(() => app?.close());

  it("an unknown path is 404, whatever the method", async () => {
    for (const method of ["GET", "POST", "DELETE"] as const) {
      const res = await app.inject({ method, url: "/nothing/here" });
      expect([method, res.statusCode, res.json().code]).toEqual([method, 404, "not_found"]);
    }
  });

  it("a wrong method on a known path is 405, and Allow names the methods of its routes", async () => {
    const res = await app.inject({ method: "POST", url: "/known" });
    expect([res.statusCode, res.headers.allow]).toEqual([405, "GET, HEAD"]);
    expect(res.json()).toEqual({ code: "unimplemented", message: "POST is not allowed on /known: use GET, HEAD" });
  });

  it("preflights are still answered, on any path", async () => {
    const res = await app.inject({ method: "OPTIONS", url: "/known", headers: { origin: "http://app.example", "access-control-request-method": "GET" } });
    expect([res.statusCode, res.headers["access-control-allow-origin"]]).toEqual([204, "http://app.example"]);
  });
});
