import { configModule } from "@gov/config-service";
import { registryModule } from "@gov/registry-service";
import { buildProcess, type BuiltProcess, type ProcessOptions } from "@gov/service-kit";
import { redisTargets, startRedis } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { platform } from "../../../apps/platform.js";
import { capturedLogger, sample, sources, TOKEN, waitUntil } from "./helpers.js";

const admin = { authorization: `Bearer ${TOKEN}` };

/** Every process kind of the product, as its entry point builds it (apps/main.ts, services/<name>/src/main.ts). */
function kinds(configUrl: string, registryUrl: string): { kind: string; options: ProcessOptions; env?: Record<string, string> }[] {
  return [
    { kind: "all-in-one", options: platform },
    { kind: "config service alone", options: { name: "gov.config-service", modules: [configModule] } },
    { kind: "registry service alone", options: { name: "gov.registry-service", modules: [registryModule] } },
    { kind: "gateway alone", options: platform, env: { GOV_CONFIG_SERVICE_URL: configUrl, GOV_REGISTRY_SERVICE_URL: registryUrl } },
  ];
}

/** Every process of the product is one application for its ID generator (see ID_APPLICATION in the process runner). */
const namespace = "gov";

async function start(options: ProcessOptions, env: Record<string, string>) {
  const proc = await buildProcess({ ...options, sources: sources({ MANAGEMENT_TOKEN: TOKEN, ...env }) });
  const urls = await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
  return { proc, urls };
}

for (const store of [{ name: "embedded", url: "", skip: "" }, ...redisTargets()]) {
  describe.skipIf(store.skip)(`every process kind issues ids and serves the monitor (${store.name})`, () => {
    const procs: BuiltProcess[] = [];
    const env: Record<string, string> = store.url ? { REDIS_URL: store.url } : {};
    let services: { config: string; registry: string };
    beforeAll(async () => {
      // the services the lone gateway calls
      const config = await start({ name: "gov.config-service", modules: [configModule] }, env);
      const registry = await start({ name: "gov.registry-service", modules: [registryModule] }, env);
      procs.push(config.proc, registry.proc);
      services = { config: config.urls.url, registry: registry.urls.url };
    });
    afterAll(async () => {
      for (const p of procs) await p.shutdown();
    });

    it("namespace = application name (gov), the distributor REDIS_URL selects, /actuator/idgen, request ids end to end", async () => {
      const machineIds: number[] = [];
      for (const { kind, options, env: own } of kinds(services.config, services.registry)) {
        const { proc, urls } = await start(options, { ...env, ...own });
        procs.push(proc);
        const health = (await proc.management.inject({ url: "/actuator/health", headers: admin })).json();
        expect(health.components.machineId, kind).toMatchObject({ status: "UP", details: { namespace, distributor: store.url ? "redis" : "manual" } });
        machineIds.push(health.components.machineId.details.machineId);
        const list = (await proc.management.inject({ url: "/actuator/idgen" })).json() as { name: string }[];
        expect(list.map((g) => g.name), kind).toContain("__share__");
        const metrics = (await proc.management.inject({ url: "/metrics" })).body;
        expect(metrics, kind).toContain(`idgen_machine_lease_up{namespace="${namespace}"} 1`);
        // a REST or Connect call takes an id from the composite generator
        const composite = `idgen_ids_generated_total{namespace="${namespace}",generator="idgen",kind="CompositeIdGenerator"}`;
        const before = sample(metrics, composite.split("{")[0], `{${composite.split("{")[1]}`)!;
        const path = options.gateway ? "/v1/configs/%7Bdemo%7D/app.yaml" : "/gov.config.v1.ConfigService/GetConfig";
        const res = options.gateway ? await fetch(urls.url + path) : await fetch(urls.url + path, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
        await res.arrayBuffer();
        const after = sample((await proc.management.inject({ url: "/metrics" })).body, composite.split("{")[0], `{${composite.split("{")[1]}`)!;
        expect(after, kind).toBe(before + 1);
      }
      // no two live processes share a leased machine id, whatever their kind: the four here and the two services
      // started first (config and registry alone), which leased before them
      if (store.url) {
        for (const p of procs.slice(0, 2)) machineIds.push((await p.management.inject({ url: "/actuator/health", headers: admin })).json().components.machineId.details.machineId);
        expect(new Set(machineIds).size).toBe(6);
      }
    });
  });
}

describe.skipIf(inject("redisSkipReason"))("the seed's operator log lines in the process's pino log", () => {
  it("AppendChain [...] - prefetch failed, prefetch still failing and Revert machine id of [...] failed, at their levels", async () => {
    const server = await startRedis();
    const log = capturedLogger();
    const proc = await buildProcess({
      name: "gov.config-service",
      modules: [configModule],
      logger: log.logger,
      sources: sources({ REDIS_URL: server.url, IDGEN_SEGMENT_ENABLED: "true", IDGEN_SEGMENT_PROVIDERS: "order", IDGEN_SEGMENT_CHAIN_PREFETCH_PERIOD: "100ms", IDGEN_MACHINE_INSTANCE_ID: "host-a:1" }),
    });
    try {
      await server.stop();
      // a chain only asks the store once its reserved ids run low: take them
      const chain = proc.monitor!.idgen.registry.get("order");
      const take = () => {
        try {
          chain.nextId!();
        } catch {
          // exhausted: the store is down
        }
      };
      await waitUntil("prefetch still failing", () => (take(), log.find("prefetch still failing").length > 0), 15_000);
      expect(log.find("AppendChain [gov.order] - prefetch failed")[0]).toMatchObject({ level: 50, logger: "gov.idgen" });
      expect(log.find("prefetch still failing")[0]).toMatchObject({ level: 40, logger: "gov.idgen" });
    } finally {
      await proc.shutdown(); // the machine id cannot be released: Redis is down
      await server.stop();
    }
    expect(log.find("Revert machine id of [host-a:1] failed")[0]).toMatchObject({ level: 50, logger: "gov.idgen" });
  });
});
