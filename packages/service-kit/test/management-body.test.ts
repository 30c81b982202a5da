/**
 * The management endpoints take no body (root README, "Operating a process"): one over 1 KiB is 413 on a method that
 * takes one, whatever its Content-Type, and a smaller one is not read. Fastify has parsers for JSON and text only, so
 * a body of any other type (curl -d's application/x-www-form-urlencoded, application/octet-stream) was refused with
 * 415 and a message calling its Content-Type "not a media type", naming Connect and gRPC-Web.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildManagementApp, createLogger, createReadiness } from "../src/index.js";
import { createMetrics } from "../src/metrics.js";

describe("the management listener and request bodies", () => {
  let app: Awaited<ReturnType<typeof buildManagementApp>>;
  beforeAll(async () => {
    app = await buildManagementApp({
      logger: createLogger("test", "silent"),
      readiness: createReadiness([]),
      metrics: createMetrics(),
      // a route that takes a body-carrying method, as /actuator/idgen/{name} does for DELETE
      extend: (a) => a.delete("/actuator/thing", async () => ({ deleted: true })),
    });
    await app.ready();
  });
  afterAll(() => app?.close());

  for (const type of ["application/octet-stream", "application/x-www-form-urlencoded", "text/plain", "application/json", "image/png"]) {
    it(`a body over 1 KiB of type ${type} is 413 resource_exhausted`, async () => {
      const res = await app.inject({ method: "DELETE", url: "/actuator/thing", headers: { "content-type": type }, payload: "x".repeat(4096) });
      expect([res.statusCode, res.json()]).toEqual([413, { code: "resource_exhausted", message: expect.stringMatching(/limit of 1024 bytes/) }]);
    });
  }

  for (const type of ["application/octet-stream", "application/x-www-form-urlencoded", "image/png"]) {
    it(`a small body of type ${type} is not read: the endpoint answers as without it`, async () => {
      const res = await app.inject({ method: "DELETE", url: "/actuator/thing", headers: { "content-type": type }, payload: "a=b" });
      expect([res.statusCode, res.json()]).toEqual([200, { deleted: true }]);
    });
  }

  it("a Content-Type that is not a media type is still 415, with the message that says so", async () => {
    const res = await app.inject({ method: "DELETE", url: "/actuator/thing", headers: { "content-type": "nonsense" }, payload: "a=b" });
    expect([res.statusCode, res.json().code]).toEqual([415, "invalid_argument"]);
  });
});
