import { createRedisConfigStore } from "@gov/config-service";
import { connectRedis } from "@gov/redis";
import { startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createTestGateway, ns, seg, type TestGateway } from "./harness.js";

describe.skipIf(inject("redisSkipReason"))("Redis stopped mid-test", () => {
  let redis: RedisServer;
  let gw: TestGateway;
  beforeAll(async () => {
    redis = await startRedis();
    gw = await createTestGateway(await createRedisConfigStore(await connectRedis(redis.url), { maxVersions: 100, kind: "redis" }));
  });
  afterAll(async () => {
    await gw?.close();
    await redis?.stop();
  });

  it("answers 503 unavailable with a clear message while Redis is down, and works again when it returns", async () => {
    const n = ns("outage");
    const url = `/v1/namespaces/${seg(n)}/configs/app.yaml`;
    const put = (data: string) => gw.app.inject({ method: "PUT", url, payload: data, headers: { "content-type": "text/plain" } });
    expect((await put("before")).json()).toBe(true);
    expect((await gw.app.inject({ method: "GET", url })).json().data).toBe("before");

    await redis.stop();
    for (const r of [
      await put("during"),
      await gw.app.inject({ method: "GET", url }),
      await gw.app.inject({ method: "GET", url: `/v1/namespaces/${seg(n)}/configs` }),
      await gw.app.inject({ method: "GET", url: `${url}/versions` }),
      await gw.app.inject({ method: "DELETE", url }),
    ]) {
      expect(r.statusCode).toBe(503);
      expect(r.json()).toEqual({ code: "unavailable", message: expect.stringMatching(/Redis .*is unavailable.*retry/i) });
    }

    await redis.start(); // an empty server on the same port
    await expect.poll(async () => (await put("after")).statusCode, { timeout: 10_000, interval: 200 }).toBe(200);
    const r = await gw.app.inject({ method: "GET", url });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ data: "after", version: 1 }); // never the pre-outage "before" from a cache
  });
});
