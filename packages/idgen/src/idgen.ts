import type { Clock } from "./clock.js";
import { CompositeIdGenerator } from "./composite.js";
import { prefixConverter, suffixConverter } from "./converters/affix.js";
import type { IdConverter } from "./converters/converter.js";
import { friendlyConverter } from "./converters/friendly.js";
import { radix36Converter, radix62Converter } from "./converters/radix.js";
import { toStringConverter } from "./converters/to-string.js";
import type { IdGenerator } from "./generator.js";
import type { SnowflakeLayout } from "./layout.js";
import { defaultIdGenLogger, type IdGenLogger } from "./logger.js";
import { defaultInstanceId } from "./machine/instance-id.js";
import { localStateDistributor } from "./machine/local-state-distributor.js";
import { MachineLease } from "./machine/lease.js";
import { InvalidSettingError } from "./errors.js";
import { fixedMachineId, type MachineIdSource } from "./machine/machine-id-source.js";
import { redisMachineIdDistributor } from "./machine/redis-distributor.js";
import type { RedisClient } from "./redis-script.js";
import { IdGeneratorRegistry, SHARE } from "./registry.js";
import { SegmentChainId } from "./segment/chain.js";
import { memorySegmentDistributor, redisSegmentDistributor } from "./segment/distributor.js";
import { stateLocationWithRedis, type ConverterType, type IdGenConfig } from "./settings.js";
import { SafeSnowflakeId, SnowflakeId } from "./snowflake.js";

export interface StartIdGenOptions {
  /** Injected client; the library never reads REDIS_URL. */
  redis?: RedisClient;
  logger?: IdGenLogger;
  clock?: Clock;
}

/** A started library instance: its generators, its lease, and `close()` for shutdown. */
export interface IdGen {
  readonly config: IdGenConfig;
  readonly registry: IdGeneratorRegistry;
  /** The machine-id lease (undefined with `manual` or when the machine module is off). */
  readonly lease: MachineLease | undefined;
  /** Stops prefetch timers and renewals, then reverts the machine id (failures are logged, never thrown). */
  close(): Promise<void>;
}

export function createConverter(type: ConverterType, layout?: SnowflakeLayout): IdConverter {
  switch (type) {
    case "radix36":
      return radix36Converter();
    case "to-string":
      return toStringConverter();
    case "friendly":
      if (!layout) throw new Error("the friendly converter needs a Snowflake layout");
      return friendlyConverter(layout);
    default:
      return radix62Converter();
  }
}

/**
 * Builds what the config asks for: the machine id (lease or manual), the Snowflake share generator, the
 * composite generator (`idgen`), and one segment chain per provider, all in one registry.
 */
export async function startIdGen(config: IdGenConfig, opts: StartIdGenOptions = {}): Promise<IdGen> {
  const logger = opts.logger ?? defaultIdGenLogger();
  const registry = new IdGeneratorRegistry();
  const { namespace, machine } = config;
  let lease: MachineLease | undefined;
  let source: MachineIdSource | undefined;
  if (machine.enabled) {
    const type = machine.distributorType ?? (opts.redis ? "redis" : "manual");
    if (type === "redis" && !opts.redis) throw new InvalidSettingError("idgen.machine.distributor.type", "redis needs a Redis client: pass { redis } to startIdGen, or use manual (with idgen.machine.machine-id)");
    if (type === "redis" && machine.stateLocation) throw stateLocationWithRedis("a Redis client was given, so the distributor is redis");
    // `manual` without a state file: a fixed id, nothing to renew or release. With one, a lease like Redis's, over
    // the file (see localStateDistributor).
    const distributor = type === "redis" && opts.redis ? redisMachineIdDistributor(opts.redis) : machine.stateLocation ? localStateDistributor(machine.machineId, machine.stateLocation) : undefined;
    if (distributor) {
      lease = await MachineLease.acquire({
        namespace,
        instanceId: machine.instanceId ?? defaultInstanceId({ port: machine.port }),
        machineBit: machine.machineBit,
        distributor,
        initialDelayMs: machine.guarder.initialDelayMs,
        delayMs: machine.guarder.delayMs,
        retryDelayMs: machine.guarder.retryDelayMs,
        requestTimeoutMs: machine.guarder.requestTimeoutMs,
        // guarder off: nothing renews, so nothing may ever be recycled and the stop rule never fires
        safeGuardMs: machine.guarder.enabled ? machine.guarder.safeGuardMs : Number.MAX_SAFE_INTEGER / 4,
        autoRenew: machine.guarder.enabled,
        brokenThresholdMs: machine.clockBackwards.brokenThresholdMs,
        clock: opts.clock,
        logger,
      });
      source = lease;
    } else {
      logger.debug({ namespace, machineId: machine.machineId, distributor: "manual" }, "Distributed machine id");
      source = fixedMachineId(machine.machineId);
    }
  }
  const sf = config.snowflake;
  if (source && sf.enabled) {
    const layout: SnowflakeLayout = { epoch: sf.epoch, timestampBit: sf.timestampBit, machineBit: machine.machineBit, sequenceBit: sf.sequenceBit };
    let converter = createConverter(sf.converter, layout);
    if (sf.prefix) converter = prefixConverter(sf.prefix, converter);
    if (sf.suffix) converter = suffixConverter(sf.suffix, converter);
    const common = { name: "snowflake", layout, machine: source, converter, clock: opts.clock, logger, ...machine.clockBackwards };
    const g: IdGenerator = sf.safeJavascript ? new SafeSnowflakeId(common) : new SnowflakeId(common);
    registry.set("snowflake", g);
    if (config.share === "snowflake") registry.set(SHARE, g);
  }
  if (source && config.generator.enabled) {
    registry.set("idgen", new CompositeIdGenerator({ name: "idgen", machine: source, clock: opts.clock, logger, ...machine.clockBackwards }));
  }
  const seg = config.segment;
  if (seg.enabled) {
    const type = seg.distributorType ?? (opts.redis ? "redis" : "memory");
    // as for the machine id: a segment counter asked of Redis and kept in memory instead would start every process at 1
    if (type === "redis" && !opts.redis) throw new InvalidSettingError("idgen.segment.distributor.type", "redis needs a Redis client: pass { redis } to startIdGen, or use memory (ids then unique within this process only)");
    for (const name of seg.providers.length ? seg.providers : ["segment"]) {
      const distributor = type === "redis" && opts.redis ? redisSegmentDistributor(opts.redis, { namespace, name }) : memorySegmentDistributor({ namespace, name });
      const chain = await SegmentChainId.create({ distributor, step: seg.step, safeDistance: seg.safeDistance, prefetchPeriodMs: seg.prefetchPeriodMs, converter: createConverter(seg.converter), logger, clock: opts.clock });
      registry.set(name, chain);
      if (config.share === "segment") registry.setIfAbsent(SHARE, chain);
    }
  }
  return {
    config,
    registry,
    lease,
    async close() {
      registry.stopAll();
      await lease?.revert();
    },
  };
}
