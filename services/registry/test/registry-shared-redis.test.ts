import { createConfigModule } from "@gov/config-service";
import { restGateway } from "@gov/gateway";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { redisTargets } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRegistryModule } from "../src/module.js";
import { ns, registryClients, seg, testSources } from "./harness.js";

for (const target of redisTargets()) {
  // As `npm start` runs it with REDIS_URL: the registry and config modules on the process's one client and Pub/Sub hub.
  describe.skipIf(target.skip)(`the registry module on the process's shared ${target.name} connection`, () => {
    let proc: BuiltProcess;
    let urls: { url: string; grpcUrl: string };
    beforeAll(async () => {
      proc = await buildProcess({
        name: "test-shared",
        modules: [createConfigModule(), createRegistryModule()],
        gateway: restGateway,
        sources: testSources({ REDIS_URL: target.url }),
        logger: createLogger("test", "silent"),
      });
      const u = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
      urls = { url: u.url, grpcUrl: u.grpcUrl! };
    });
    afterAll(async () => proc?.shutdown());

    it("stores in Redis, reports its kind, and its watch hears the changes through the shared hub", async () => {
      expect(proc.modules.map((m) => m.describe)).toContainEqual(expect.stringMatching(new RegExp(`^${target.name} at `)));
      const n = ns("shared");
      const [{ client }] = registryClients(urls);
      const stop = new AbortController();
      const ops: string[] = [];
      const watch = (async () => {
        for await (const m of client.watchInstances({ namespace: n, serviceId: "s" }, { signal: stop.signal })) ops.push(m.op);
      })().catch(() => undefined);
      await expect.poll(() => ops, { timeout: 3000 }).toEqual(["current"]);
      const r = await fetch(`${urls.url}/v1/namespaces/${seg(n)}/services/s/instances`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ schema: "http", host: "h", port: 1 }),
      });
      expect(await r.json()).toBe(true);
      await expect.poll(() => ops, { timeout: 1000, interval: 10 }).toEqual(["current", "register"]);
      stop.abort();
      await watch;
    });
  });
}
