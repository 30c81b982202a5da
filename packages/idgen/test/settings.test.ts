import { connectRedis, type RedisClient } from "@gov/redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  GeneratorNotFoundError,
  idgenConfigFromSettings,
  InvalidSettingError,
  parseDuration,
  SHARE,
  startIdGen,
} from "../src/index.js";
import { captureLogs, uniqueNamespace } from "./helpers.js";

describe("idgenConfigFromSettings", () => {
  it("applies the contract §9 defaults", () => {
    const c = idgenConfigFromSettings({ "idgen.namespace": "gateway" });
    expect(c.namespace).toBe("gateway");
    expect(c.machine).toMatchObject({
      enabled: true,
      distributorType: undefined, // redis when a client is given, else manual
      machineId: 0,
      machineBit: 10,
      guarder: { enabled: true, initialDelayMs: 60_000, delayMs: 60_000, retryDelayMs: 10_000, requestTimeoutMs: 5_000, safeGuardMs: 300_000 },
      clockBackwards: { spinThresholdMs: 1, brokenThresholdMs: 500 },
    });
    expect(c.generator.enabled).toBe(true);
    expect(c.snowflake).toMatchObject({ enabled: true, timestampBit: 41, sequenceBit: 12, converter: "radix62" });
  });

  it("parses durations with case-insensitive units", () => {
    expect(parseDuration("500ms", "x")).toBe(500);
    expect(parseDuration("10s", "x")).toBe(10_000);
    expect(parseDuration("1m", "x")).toBe(60_000);
    expect(parseDuration("3H", "x")).toBe(10_800_000);
    const c = idgenConfigFromSettings({ "idgen.machine.guarder.delay": "30S", "idgen.machine.guarder.safe-guard-duration": "2M", "idgen.machine.distributor.type": "Manual" });
    expect(c.machine.guarder).toMatchObject({ delayMs: 30_000, safeGuardMs: 120_000 });
    expect(c.machine.distributorType).toBe("manual");
  });

  it("throws an error naming the setting on a bad value", () => {
    const bad: Record<string, string> = {
      "idgen.machine.guarder.delay": "soon",
      "idgen.machine.enabled": "maybe",
      "idgen.machine.distributor.type": "zookeeper",
      "idgen.machine.machine-id": "2000",
      "idgen.segment.step": "-1",
      "idgen.snowflake.converter": "base64",
    };
    for (const [key, value] of Object.entries(bad)) {
      let err: unknown;
      try {
        idgenConfigFromSettings({ [key]: value });
      } catch (e) {
        err = e;
      }
      expect(err, key).toBeInstanceOf(InvalidSettingError);
      expect((err as Error).message).toContain(key);
    }
    expect(() => idgenConfigFromSettings({ "idgen.machine.guarder.delay": "10m" })).toThrow(/idgen.machine.guarder.delay/);
    // a first (or next) renewal planned after the generators would stop without one: T − min(10 s, T/10) = 18 s here
    const guard = { "idgen.machine.guarder.delay": "5s", "idgen.machine.guarder.safe-guard-duration": "20s" };
    expect(() => idgenConfigFromSettings({ ...guard, "idgen.machine.guarder.initial-delay": "60s" })).toThrow(/idgen.machine.guarder.initial-delay.*must be shorter than 18000 ms/);
    expect(() => idgenConfigFromSettings({ ...guard, "idgen.machine.guarder.delay": "19s", "idgen.machine.guarder.initial-delay": "1s" })).toThrow(/idgen.machine.guarder.delay.*must be shorter than 18000 ms/);
    expect(idgenConfigFromSettings({ ...guard, "idgen.machine.guarder.initial-delay": "17s" }).machine.guarder.initialDelayMs).toBe(17_000);
    // yes/no and 1/0, as every other setting of the process takes them
    expect(idgenConfigFromSettings({ "idgen.segment.enabled": "yes" }).segment.enabled).toBe(true);
    expect(idgenConfigFromSettings({ "idgen.snowflake.enabled": "0", "idgen.segment.enabled": "1", "idgen.share": "segment" }).snowflake.enabled).toBe(false);
    // a share of a generator that is off (there would be no __share__), an epoch in the future (no id could be issued)
    expect(() => idgenConfigFromSettings({ "idgen.share": "segment" })).toThrow(/idgen.share: "segment" names a generator that is switched off: set idgen.segment.enabled=true/);
    expect(idgenConfigFromSettings({ "idgen.share": "segment", "idgen.segment.enabled": "true" }).share).toBe("segment");
    expect(() => idgenConfigFromSettings({ "idgen.snowflake.epoch": String(Date.now() + 86_400_000) })).toThrow(/idgen.snowflake.epoch: .* is in the future/);
    // too few timestamp bits for the time since the epoch: every Snowflake id would overflow
    expect(() => idgenConfigFromSettings({ "idgen.snowflake.timestamp-bit": "30" })).toThrow(/idgen.snowflake.timestamp-bit: 30 bits hold 1073741823 ms since the epoch .* which ended 2020-01-06T02:15:41.823Z: give more bits, or a later epoch/);
    expect(idgenConfigFromSettings({ "idgen.snowflake.timestamp-bit": "30", "idgen.snowflake.epoch": String(Date.now() - 1000) }).snowflake.timestampBit).toBe(30);
    // no machine id: the generators that need one are not built, so switched on they are refused at once (they were
    // missing at their first use, with health reporting a machine id that was not held)
    expect(() => idgenConfigFromSettings({ "idgen.machine.enabled": "false" })).toThrow(
      /idgen.machine.enabled: false leaves no machine id, which idgen.snowflake.enabled and idgen.generator.enabled need: keep it true, or switch those off too/,
    );
    expect(() => idgenConfigFromSettings({ "idgen.machine.enabled": "false", "idgen.snowflake.enabled": "false", "idgen.segment.enabled": "true", "idgen.share": "segment" })).toThrow(
      /which idgen.generator.enabled need: .*switch that off too/,
    );
    const segmentOnly = { "idgen.machine.enabled": "false", "idgen.snowflake.enabled": "false", "idgen.generator.enabled": "false", "idgen.segment.enabled": "true", "idgen.share": "segment" };
    expect(idgenConfigFromSettings(segmentOnly).machine.enabled).toBe(false);
  });

  it("refuses a segment chain named like a generator it would replace, or named twice", () => {
    // `idgen` is where request and audit ids come from: a chain of that name replaced the composite generator unsaid,
    // and the process's request ids became 1, 2, 3… (in memory: again from 1 at every start)
    const segment = { "idgen.segment.enabled": "true" };
    for (const name of ["idgen", "snowflake", "__share__"]) {
      expect(() => idgenConfigFromSettings({ ...segment, "idgen.segment.providers": `order, ${name}` }), name).toThrow(
        new RegExp(`idgen.segment.providers: "${name}" is the name of .*choose another name`),
      );
    }
    expect(() => idgenConfigFromSettings({ ...segment, "idgen.segment.providers": "order,order" })).toThrow(/idgen.segment.providers: "order" is listed twice/);
    // a name whose generator is switched off is free
    expect(idgenConfigFromSettings({ ...segment, "idgen.generator.enabled": "false", "idgen.segment.providers": "idgen" }).segment.providers).toEqual(["idgen"]);
  });
});

describe("startIdGen with the manual distributor", () => {
  it("registers share, snowflake and the composite generator; registry lists, describes and removes", async () => {
    const logs = captureLogs();
    const idgen = await startIdGen(
      idgenConfigFromSettings({ "idgen.namespace": "svc", "idgen.machine.machine-id": "42", "idgen.segment.enabled": "true", "idgen.segment.providers": "order" }),
      { logger: logs.logger },
    );
    const r = idgen.registry;
    expect(idgen.lease).toBeUndefined();
    expect(r.names().sort()).toEqual([SHARE, "idgen", "order", "snowflake"].sort());
    expect(typeof r.share.nextId!()).toBe("bigint");
    expect(r.get("idgen").nextIdAsString()).toHaveLength(15);
    expect(r.get("order").nextId!()).toBe(1);
    const list = r.list();
    expect(list.find((g) => g.name === "snowflake")).toMatchObject({ kind: "SnowflakeId", converter: { kind: "Radix62IdConverter" }, state: { machineId: 42 } });
    expect(list.find((g) => g.name === "order")).toMatchObject({ kind: "SegmentChainId", state: { currentSegment: { maxId: 10 } } });
    expect(r.remove("order").name).toBe("order");
    expect(() => r.get("order")).toThrow(GeneratorNotFoundError);
    await idgen.close();
  });
});

describe("startIdGen switches", () => {
  it("idgen.generator.enabled=false drops the composite; idgen.machine.enabled=false drops machine-id generators", async () => {
    const logger = captureLogs().logger;
    const a = await startIdGen(idgenConfigFromSettings({ "idgen.generator.enabled": "false" }), { logger });
    expect(a.registry.names().sort()).toEqual([SHARE, "snowflake"].sort());
    const noMachine = { "idgen.machine.enabled": "false", "idgen.snowflake.enabled": "false", "idgen.generator.enabled": "false" };
    const b = await startIdGen(idgenConfigFromSettings({ ...noMachine, "idgen.segment.enabled": "true", "idgen.share": "segment" }), { logger });
    expect(b.registry.names().sort()).toEqual([SHARE, "segment"].sort());
    expect(b.registry.share.kind).toBe("SegmentChainId");
    const c = await startIdGen(idgenConfigFromSettings({ "idgen.snowflake.safe-javascript": "true", "idgen.machine.machine-id": "7" }), { logger });
    const id = c.registry.share.nextId!();
    expect(typeof id).toBe("number");
    expect(Number.isSafeInteger(id)).toBe(true);
    expect(() => idgenConfigFromSettings({ "idgen.snowflake.safe-javascript": "true", "idgen.machine.machine-id": "8" })).toThrow(/idgen.machine.machine-id/);
    await Promise.all([a.close(), b.close(), c.close()]);
  });

  it("idgen.machine.distributor.type=redis without a client fails with a clear message", async () => {
    await expect(startIdGen(idgenConfigFromSettings({ "idgen.machine.distributor.type": "redis" }), { logger: captureLogs().logger })).rejects.toThrow(/needs a Redis client/);
  });

  it("idgen.segment.distributor.type=redis without a client fails too: a counter kept in memory would start every process at 1", async () => {
    const config = idgenConfigFromSettings({
      "idgen.segment.enabled": "true",
      "idgen.segment.distributor.type": "redis",
      "idgen.share": "segment",
      "idgen.machine.enabled": "false",
      "idgen.snowflake.enabled": "false",
      "idgen.generator.enabled": "false",
    });
    await expect(startIdGen(config, { logger: captureLogs().logger })).rejects.toThrow(/idgen\.segment\.distributor\.type.*needs a Redis client/);
  });
});

describe.skipIf(inject("redisSkipReason"))("startIdGen with a Redis Cluster client", () => {
  let client: RedisClient;
  beforeAll(async () => {
    client = await connectRedis(inject("redisClusterUrl"));
  });
  afterAll(() => client?.disconnect());

  it("defaults to the redis distributor, holds a lease, and reverts it on close", async () => {
    const ns = uniqueNamespace("start");
    const logs = captureLogs();
    const idgen = await startIdGen(idgenConfigFromSettings({ "idgen.namespace": ns, "idgen.machine.instance-id": "svc-1" }), { redis: client, logger: logs.logger });
    expect(idgen.lease?.state()).toMatchObject({ status: "UP", distributor: "redis", instanceId: "svc-1", machineId: 0 });
    expect(idgen.registry.share.describe().state.machineId).toBe(0);
    await idgen.close();
    expect(idgen.lease?.state().status).toBe("REVERTED");
    expect(await client.hexists(`idgen:{${ns}}:revert`, "0")).toBe(1);
  });
});
