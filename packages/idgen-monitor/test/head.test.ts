import { configModule } from "@gov/config-service";
import { buildProcess, type BuiltProcess } from "@gov/service-kit";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { sources, TOKEN, USER_TOKEN } from "./helpers.js";

const admin = { authorization: `Bearer ${TOKEN}` };
const user = { authorization: `Bearer ${USER_TOKEN}` };
const authorizeManagement = async (header: string | undefined) => (header === `Bearer ${USER_TOKEN}` ? ("user" as const) : undefined);

/** A config service's own process on the embedded store (manual machine id, in-memory segments), with `env`. */
const process = (env: Record<string, string>) =>
  buildProcess({ name: "gov.config-service", modules: [configModule], sources: sources({ MANAGEMENT_TOKEN: TOKEN, ...env }), authorizeManagement });

/** Response headers but the date (and Content-Length, which HEAD's 200 leaves out: the length of ids not generated). */
const headersOf = (res: { headers: Record<string, unknown> }, withLength = true) => {
  const { date: _date, "content-length": length, ...rest } = res.headers;
  return withLength ? { ...rest, "content-length": length } : rest;
};

describe("HEAD on the id operations (uptime checks and load-balancer probes send it)", () => {
  let proc: BuiltProcess;
  beforeAll(async () => {
    proc = await process({ MANAGEMENT_ENDPOINTS_WEB_EXPOSURE_INCLUDE: "health,idgen,idgenGenerator,idgenStringGenerator", IDGEN_SEGMENT_ENABLED: "true", IDGEN_SEGMENT_PROVIDERS: "order" });
  });
  afterAll(() => proc?.shutdown());
  afterEach(() => void vi.restoreAllMocks());
  const call = (method: "GET" | "HEAD" | "DELETE" | "POST", url: string, headers: Record<string, string> = {}) => proc.management.inject({ method, url, headers });
  const issued = (name: string) => proc.monitor!.idgen.registry.get(name).generatedCount;

  it("issues no id, with or without count: a segment chain's next GET gets the id after the last GET's", async () => {
    const first = await call("GET", "/actuator/idgenGenerator/order", admin);
    expect(first.statusCode).toBe(200);
    const before = issued("order");
    for (const url of ["/actuator/idgenGenerator/order", "/actuator/idgenGenerator/order?count=1000", "/actuator/idgenStringGenerator/order?count=1000", "/actuator/idgenStringGenerator/order"]) {
      const issuedBefore = issued("order");
      const head = await call("HEAD", url, admin);
      expect(issued("order") - issuedBefore, `ids issued by HEAD ${url}`).toBe(0);
      const get = await call("GET", url, admin); // issues ids: the chain moves on by what GET asked for
      expect([head.statusCode, head.body], url).toEqual([200, ""]);
      expect(headersOf(head, false), url).toEqual(headersOf(get, false)); // content-type application/json; charset=utf-8
      expect(head.headers["content-length"], url).toBeUndefined();
      expect(get.body.length, url).toBeGreaterThan(0);
    }
    // only the GETs issued ids (1 + 1000 + 1000 + 1); the HEADs before each, none
    expect(issued("order") - before).toBe(2002);
    const second = await call("GET", "/actuator/idgenGenerator/order", admin);
    expect(BigInt(second.json() as string) - BigInt(first.json() as string)).toBe(2003n);
  });

  it("issues no id from a Snowflake or the composite generator: on a clock standing still, the next GET is the id after the last", async () => {
    const now = Date.now();
    vi.spyOn(Date, "now").mockImplementation(() => now); // one millisecond: consecutive ids differ by their sequence only
    const first = BigInt((await call("GET", "/actuator/idgenGenerator/snowflake", admin)).json() as string);
    const [snowflake, composite] = [issued("snowflake"), issued("idgen")];
    for (const url of ["/actuator/idgenGenerator", "/actuator/idgenGenerator/snowflake?count=1000", "/actuator/idgenStringGenerator?count=1000", "/actuator/idgenStringGenerator/idgen?count=1000", "/actuator/idgenStringGenerator/idgen"]) {
      const head = await call("HEAD", url, admin);
      expect([head.statusCode, head.body, head.headers["content-type"]], url).toEqual([200, "", "application/json; charset=utf-8"]);
    }
    expect([issued("snowflake"), issued("idgen")]).toEqual([snowflake, composite]);
    const second = BigInt((await call("GET", "/actuator/idgenGenerator/snowflake", admin)).json() as string);
    expect(second - first).toBe(1n);
  });

  it("answers as GET does where GET refuses: 401 (WWW-Authenticate), 403, 400 and 404 with GET's headers, no body, no id", async () => {
    const before = [issued("order"), issued("snowflake"), issued("idgen")];
    const cases: [string, Record<string, string>, number][] = [
      ["/actuator/idgenGenerator/order?count=1000", {}, 401],
      ["/actuator/idgenStringGenerator", { authorization: "Bearer not-the-token-at-all" }, 401],
      ["/actuator/idgenStringGenerator/idgen?count=5", user, 403],
      ["/actuator/idgenGenerator/order", user, 403],
      ["/actuator/idgenGenerator/snowflake?count=1001", admin, 400],
      ["/actuator/idgenGenerator/idgen", admin, 400], // string ids only
      ["/actuator/idgenStringGenerator/nope", admin, 404],
    ];
    for (const [url, headers, status] of cases) {
      const get = await call("GET", url, headers);
      const head = await call("HEAD", url, headers);
      expect([get.statusCode, head.statusCode, head.body], url).toEqual([status, status, ""]);
      expect(headersOf(head), url).toEqual(headersOf(get)); // Content-Length too: the refusal GET sends is known
    }
    expect((await call("HEAD", "/actuator/idgenStringGenerator")).headers["www-authenticate"]).toContain("Bearer");
    expect([issued("order"), issued("snowflake"), issued("idgen")]).toEqual(before);
  });

  it("answers 503 as GET does while a Snowflake refuses every id (a clock stepped back past what it waits out)", async () => {
    await call("GET", "/actuator/idgenGenerator/snowflake", admin);
    const real = Date.now.bind(Date);
    vi.spyOn(Date, "now").mockImplementation(() => real() - 60_000);
    const before = issued("snowflake");
    const get = await call("GET", "/actuator/idgenGenerator/snowflake", admin);
    const head = await call("HEAD", "/actuator/idgenGenerator/snowflake?count=3", admin);
    expect([get.statusCode, head.statusCode, head.body]).toEqual([503, 503, ""]);
    expect(headersOf(head, false)).toEqual(headersOf(get, false));
    expect(issued("snowflake")).toBe(before);
    // a segment chain does not depend on the clock: HEAD on it still answers 200
    expect((await call("HEAD", "/actuator/idgenGenerator/order", admin)).statusCode).toBe(200);
  });

  it("other methods on the operations are 405 with Allow: GET, HEAD; HEAD on the read-only endpoints answers as before", async () => {
    for (const method of ["DELETE", "POST"] as const) {
      const res = await call(method, "/actuator/idgenGenerator/order", admin);
      expect([res.statusCode, res.headers.allow, res.json().code]).toEqual([405, "GET, HEAD", "unimplemented"]);
    }
    for (const url of ["/actuator/health", "/actuator/idgen", "/actuator/idgen/order", "/metrics"]) {
      const head = await call("HEAD", url);
      expect([head.statusCode, head.body], url).toEqual([200, ""]);
      expect(Number(head.headers["content-length"]), url).toBeGreaterThan(0); // the length of GET's body, as before
    }
  });
});

it("HEAD on an operation that is not exposed is GET's 404", async () => {
  const proc = await process({});
  try {
    for (const url of ["/actuator/idgenGenerator", "/actuator/idgenStringGenerator/idgen?count=2"]) {
      const get = await proc.management.inject({ method: "GET", url, headers: admin });
      const head = await proc.management.inject({ method: "HEAD", url, headers: admin });
      // the listener's own 404 (no route): its message names the method, so the lengths differ by one; the body that
      // inject() shows is dropped on the wire by Node for a HEAD
      expect([get.statusCode, head.statusCode], url).toEqual([404, 404]);
      expect(headersOf(head, false), url).toEqual(headersOf(get, false));
    }
  } finally {
    await proc.shutdown();
  }
});
