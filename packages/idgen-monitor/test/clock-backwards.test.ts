import { configModule } from "@gov/config-service";
import { buildProcess, type BuiltProcess } from "@gov/service-kit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { sources, TOKEN } from "./helpers.js";

describe("a clock stepped back further than the generators wait out", () => {
  let proc: BuiltProcess;
  let base: string;
  beforeAll(async () => {
    proc = await buildProcess({ name: "gov.config-service", modules: [configModule], sources: sources({ MANAGEMENT_TOKEN: TOKEN }) });
    base = (await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" })).url;
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await proc?.shutdown();
  });
  const probe = async (url: string) => (await proc.management.inject({ url, headers: { authorization: `Bearer ${TOKEN}` } })).statusCode;

  it("turns readiness DOWN while ids are refused (not liveness: a restart does not fix a clock), and UP once it caught up", async () => {
    expect((await fetch(`${base}/v1/namespaces/{dev}/configs/a`)).status).not.toBe(503); // an id issued now
    const real = Date.now.bind(Date);
    let stepBack = 60_000;
    vi.spyOn(Date, "now").mockImplementation(() => real() - stepBack);
    try {
      const refused = await fetch(`${base}/v1/namespaces/{dev}/configs/a`);
      expect(refused.status).toBe(503); // every request that needs an id, for as long as the step was
      expect(await refused.text()).toContain("ClockTooManyBackwardsException");
      const ready = await proc.management.inject({ url: "/actuator/health/readiness", headers: { authorization: `Bearer ${TOKEN}` } });
      expect(ready.statusCode).toBe(503);
      expect(ready.json().components.idgen).toMatchObject({ status: "DOWN", details: { reason: expect.stringContaining("behind the last timestamp generator [") } });
      expect(await probe("/actuator/health")).toBe(503);
      expect(await probe("/actuator/health/liveness")).toBe(200);
      stepBack = 0; // the clock caught up
      expect(await probe("/actuator/health/readiness")).toBe(200);
      expect((await fetch(`${base}/v1/namespaces/{dev}/configs/a`)).status).not.toBe(503);
    } finally {
      vi.restoreAllMocks();
    }
  });
});
