// Public API of @gov/idgen. Everything is listed explicitly; files not exported here are internal.

// Generators
export { SnowflakeId, SafeSnowflakeId, type SnowflakeOptions } from "./snowflake.js";
export { CompositeIdGenerator, parseCompositeId, type CompositeOptions, type CompositeParts } from "./composite.js";
export { SegmentChainId, type SegmentChainOptions } from "./segment/chain.js";
export type { IdGenerator, GeneratorDescription } from "./generator.js";
export { TickSequencer, type SequencerOptions } from "./sequencer.js";

// Layouts
export {
  IDGEN_EPOCH,
  MILLISECOND_LAYOUT,
  SAFE_JS_LAYOUT,
  isSafeJavascript,
  parseSnowflake,
  composeSnowflake,
  type SnowflakeLayout,
  type SnowflakeParts,
} from "./layout.js";

// Converters
export type { IdConverter, ConverterDescription } from "./converters/converter.js";
export { radix62Converter, radix36Converter, type RadixOptions } from "./converters/radix.js";
export { toStringConverter, type ToStringOptions } from "./converters/to-string.js";
export { friendlyConverter, type FriendlyOptions } from "./converters/friendly.js";
export { prefixConverter, suffixConverter } from "./converters/affix.js";

// Machine ids
export { MachineLease, stopAfterMs, type MachineLeaseOptions, type LeaseState, type LeaseStatus, type StopClock } from "./machine/lease.js";
export { manualDistributor, type MachineIdDistributor, type MachineState, type DistributeRequest, type LeaseRequest } from "./machine/distributor.js";
export { redisMachineIdDistributor, machineKeys } from "./machine/redis-distributor.js";
export { localStateDistributor, stateFile } from "./machine/local-state-distributor.js";
export { fixedMachineId, type MachineIdSource } from "./machine/machine-id-source.js";
export { defaultInstanceId, hostAddress } from "./machine/instance-id.js";

// Segment distributors
export {
  memorySegmentDistributor,
  redisSegmentDistributor,
  segmentKey,
  type SegmentDistributor,
  type SegmentDistributorOptions,
} from "./segment/distributor.js";

// Registry, settings, bootstrap
export { IdGeneratorRegistry, SHARE, type NamedGeneratorDescription } from "./registry.js";
export { idgenConfigFromSettings, type IdGenConfig, type ConverterType } from "./settings.js";
export { parseDuration } from "./duration.js";
export { startIdGen, createConverter, type IdGen, type StartIdGenOptions } from "./idgen.js";
export type { RedisClient } from "./redis-script.js";

// Observability
export { channels, CHANNEL_NAMES } from "./channels.js";
export { IDGEN_LOGGER_NAME, defaultIdGenLogger, type IdGenLogger } from "./logger.js";
export { systemClock, monotonicNow, type Clock, type MonotonicNow } from "./clock.js";

// Errors
export {
  IdGenError,
  MachineIdLostException,
  MachineIdOverflowException,
  LeaseRequestTimeoutError,
  LeaseUnconfirmedError,
  ClockBackwardsException,
  ClockTooManyBackwardsException,
  ClockStalledError,
  TimestampOverflowException,
  SegmentExhaustedError,
  InvalidSettingError,
  InvalidIdError,
  GeneratorNotFoundError,
  errorClasses,
  type IdGenErrorCode,
} from "./errors.js";
