import { parseDuration } from "./duration.js";
import { InvalidSettingError } from "./errors.js";
import { IDGEN_EPOCH } from "./layout.js";
import { stopAfterMs } from "./machine/lease.js";

export type ConverterType = "radix62" | "radix36" | "to-string" | "friendly";

/** Resolved configuration of the library (what `startIdGen` takes). Durations in ms. */
export interface IdGenConfig {
  namespace: string;
  machine: {
    enabled: boolean;
    /** `undefined` = automatic: `redis` when a Redis client is given, else `manual`. */
    distributorType: "redis" | "manual" | undefined;
    machineId: number;
    /** `manual` only: the folder of the file that keeps the id's last timestamp across restarts; undefined = none. */
    stateLocation: string | undefined;
    machineBit: number;
    instanceId: string | undefined;
    port: number | undefined;
    guarder: { enabled: boolean; initialDelayMs: number; delayMs: number; retryDelayMs: number; requestTimeoutMs: number; safeGuardMs: number };
    clockBackwards: { spinThresholdMs: number; brokenThresholdMs: number };
  };
  snowflake: { enabled: boolean; safeJavascript: boolean; epoch: number; timestampBit: number; sequenceBit: number; converter: ConverterType; prefix: string; suffix: string };
  generator: { enabled: boolean };
  segment: { enabled: boolean; distributorType: "redis" | "memory" | undefined; providers: string[]; step: number; safeDistance: number; prefetchPeriodMs: number; converter: ConverterType };
  /** Which generator is registered as `__share__`. */
  share: "snowflake" | "segment";
}

type Settings = Record<string, string | undefined>;

function str(s: Settings, key: string, def: string): string {
  const v = s[key]?.trim();
  return v === undefined || v === "" ? def : v;
}

/** The forms every other setting of the process takes too (yes/no, 1/0), so that one spelling works everywhere. */
function bool(s: Settings, key: string, def: boolean): boolean {
  const v = str(s, key, String(def)).toLowerCase();
  if (v === "true" || v === "yes" || v === "1") return true;
  if (v === "false" || v === "no" || v === "0") return false;
  throw new InvalidSettingError(key, `"${s[key]}" is not true or false`);
}

function int(s: Settings, key: string, def: number, min: number, max: number): number {
  const raw = str(s, key, String(def));
  const n = Number(raw);
  if (!/^-?\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min || n > max) throw new InvalidSettingError(key, `"${raw}" is not an integer in ${min}..${max}`);
  return n;
}

function duration(s: Settings, key: string, def: string): number {
  const ms = parseDuration(str(s, key, def), key);
  if (ms <= 0) throw new InvalidSettingError(key, `"${s[key]}" must be positive`);
  return ms;
}

function oneOf<T extends string>(s: Settings, key: string, allowed: readonly T[], def: T | undefined): T | undefined {
  const v = s[key]?.trim().toLowerCase();
  if (v === undefined || v === "") return def;
  if (!(allowed as readonly string[]).includes(v)) throw new InvalidSettingError(key, `"${s[key]}" is not one of ${allowed.join(", ")}`);
  return v as T;
}

/** The state file is the `manual` distributor's: Redis keeps a released id's last timestamp itself (its revert pool). */
export const stateLocationWithRedis = (why: string) =>
  new InvalidSettingError(
    "idgen.machine.state-storage.local.state-location",
    `keeps the manual distributor's last timestamp, but ${why}, which keeps it in Redis: unset it, or set idgen.machine.distributor.type=manual`,
  );

const CONVERTERS = ["radix62", "radix36", "to-string", "friendly"] as const;

/**
 * Segment chains are registered by their names, after the Snowflake (`snowflake`, `__share__`) and composite (`idgen`)
 * generators: a chain named like one of them replaced it unsaid — `idgen` is where a process's request and audit ids
 * come from — and a name given twice built a chain only to replace it.
 */
function checkProviderNames(config: IdGenConfig): void {
  if (!config.segment.enabled) return;
  const taken: Record<string, string | false> = {
    snowflake: config.snowflake.enabled && "the Snowflake generator",
    idgen: config.generator.enabled && "the composite generator (request and audit ids)",
    __share__: "the shared generator",
  };
  const seen = new Set<string>();
  for (const name of config.segment.providers) {
    const owner = Object.hasOwn(taken, name) ? taken[name] : false;
    if (owner) throw new InvalidSettingError("idgen.segment.providers", `"${name}" is the name of ${owner}, which a segment chain of that name would replace: choose another name`);
    if (seen.has(name)) throw new InvalidSettingError("idgen.segment.providers", `"${name}" is listed twice`);
    seen.add(name);
  }
}

/**
 * Reads the `idgen.*` settings from a flat map of dotted names (YAML or environment already flattened) and
 * applies the defaults of contract §9. Throws `InvalidSettingError` naming the setting on a bad value.
 */
export function idgenConfigFromSettings(settings: Settings): IdGenConfig {
  const s = settings;
  const safeJavascript = bool(s, "idgen.snowflake.safe-javascript", false);
  const delayMs = duration(s, "idgen.machine.guarder.delay", "1m");
  const retryDelayMs = duration(s, "idgen.machine.guarder.retry-delay", `${Math.min(delayMs, 10_000)}ms`);
  const safeGuardMs = duration(s, "idgen.machine.guarder.safe-guard-duration", "5m");
  const machineBit = int(s, "idgen.machine.machine-bit", safeJavascript ? 3 : 10, 1, 20);
  const config: IdGenConfig = {
    namespace: str(s, "idgen.namespace", "idgen"),
    machine: {
      enabled: bool(s, "idgen.machine.enabled", true),
      distributorType: oneOf(s, "idgen.machine.distributor.type", ["redis", "manual"] as const, undefined),
      machineId: int(s, "idgen.machine.machine-id", 0, 0, 2 ** machineBit - 1),
      stateLocation: s["idgen.machine.state-storage.local.state-location"]?.trim() || undefined,
      machineBit,
      instanceId: s["idgen.machine.instance-id"]?.trim() || undefined,
      port: s["idgen.machine.port"] ? int(s, "idgen.machine.port", 0, 0, 65535) : undefined,
      guarder: {
        enabled: bool(s, "idgen.machine.guarder.enabled", true),
        initialDelayMs: duration(s, "idgen.machine.guarder.initial-delay", "1m"),
        delayMs,
        retryDelayMs,
        requestTimeoutMs: duration(s, "idgen.machine.guarder.request-timeout", `${Math.min(retryDelayMs, 5_000)}ms`),
        safeGuardMs,
      },
      clockBackwards: {
        spinThresholdMs: duration(s, "idgen.machine.clock-backwards.spin-threshold", "1ms"),
        brokenThresholdMs: duration(s, "idgen.machine.clock-backwards.broken-threshold", "500ms"),
      },
    },
    snowflake: {
      enabled: bool(s, "idgen.snowflake.enabled", true),
      safeJavascript,
      epoch: int(s, "idgen.snowflake.epoch", IDGEN_EPOCH, 0, Number.MAX_SAFE_INTEGER),
      timestampBit: int(s, "idgen.snowflake.timestamp-bit", 41, 1, 62),
      sequenceBit: int(s, "idgen.snowflake.sequence-bit", safeJavascript ? 9 : 12, 1, 22),
      converter: oneOf(s, "idgen.snowflake.converter", CONVERTERS, "radix62")!,
      prefix: str(s, "idgen.snowflake.prefix", ""),
      suffix: str(s, "idgen.snowflake.suffix", ""),
    },
    generator: { enabled: bool(s, "idgen.generator.enabled", true) },
    segment: {
      enabled: bool(s, "idgen.segment.enabled", false),
      distributorType: oneOf(s, "idgen.segment.distributor.type", ["redis", "memory"] as const, undefined),
      providers: str(s, "idgen.segment.providers", "").split(",").map((p) => p.trim()).filter(Boolean),
      step: int(s, "idgen.segment.step", 10, 1, 1_000_000_000),
      safeDistance: int(s, "idgen.segment.chain.safe-distance", 2, 1, 1_000_000),
      prefetchPeriodMs: duration(s, "idgen.segment.chain.prefetch-period", "1s"),
      converter: oneOf(s, "idgen.segment.converter", CONVERTERS, "radix62")!,
    },
    share: oneOf(s, "idgen.share", ["snowflake", "segment"] as const, "snowflake")!,
  };
  const bits = config.snowflake.timestampBit + machineBit + config.snowflake.sequenceBit;
  if (bits > (safeJavascript ? 53 : 63)) {
    throw new InvalidSettingError("idgen.snowflake.timestamp-bit", `timestamp + machine + sequence bits = ${bits}, more than ${safeJavascript ? 53 : 63}`);
  }
  // Without a machine id neither the Snowflake generator nor the composite one is built: switched on, they (and the
  // `__share__` of the Snowflake one) would be missing at their first use, after a startup that said nothing.
  const needMachine = [config.snowflake.enabled && "idgen.snowflake.enabled", config.generator.enabled && "idgen.generator.enabled"].filter(Boolean);
  if (!config.machine.enabled && needMachine.length) {
    throw new InvalidSettingError(
      "idgen.machine.enabled",
      `false leaves no machine id, which ${needMachine.join(" and ")} need: keep it true, or switch ${needMachine.length > 1 ? "those" : "that"} off too (and share the segment generator: idgen.share=segment, idgen.segment.enabled=true)`,
    );
  }
  checkProviderNames(config);
  if (config.machine.distributorType === "redis" && config.machine.stateLocation) throw stateLocationWithRedis("idgen.machine.distributor.type is redis");
  const shared = config[config.share];
  if (!shared.enabled) {
    // `__share__` (the request ids' source, and the default of every idgen operation) would not exist
    throw new InvalidSettingError("idgen.share", `"${config.share}" names a generator that is switched off: set idgen.${config.share}.enabled=true, or share the other one`);
  }
  const maxTimestamp = 2 ** config.snowflake.timestampBit - 1;
  if (config.snowflake.enabled && Date.now() - config.snowflake.epoch > maxTimestamp) {
    // every id would overflow its timestamp bits: the process started, and refused each Snowflake id (with
    // idgen.generator.enabled=false every request id too) while health said UP
    throw new InvalidSettingError(
      "idgen.snowflake.timestamp-bit",
      `${config.snowflake.timestampBit} bits hold ${maxTimestamp} ms since the epoch (idgen.snowflake.epoch ${config.snowflake.epoch}), which ended ${new Date(config.snowflake.epoch + maxTimestamp).toISOString()}: give more bits, or a later epoch`,
    );
  }
  if (config.snowflake.epoch > Date.now()) {
    // every id would need a negative timestamp: the generator would refuse each one
    throw new InvalidSettingError("idgen.snowflake.epoch", `${config.snowflake.epoch} (${new Date(Math.min(config.snowflake.epoch, 8.64e15)).toISOString()}) is in the future: give a past time in epoch milliseconds`);
  }
  // A lease with no successful renewal stops its generators stopAfterMs(T) after the last one: a first renewal (or a
  // next one) planned later than that would stop every generator before it is even tried.
  const stopAfter = stopAfterMs(safeGuardMs);
  for (const [setting, ms] of [["idgen.machine.guarder.initial-delay", config.machine.guarder.initialDelayMs], ["idgen.machine.guarder.delay", config.machine.guarder.delayMs]] as const) {
    if (config.machine.guarder.enabled && ms >= stopAfter) {
      throw new InvalidSettingError(setting, `must be shorter than ${stopAfter} ms: without a renewal the generators stop that long after the last one (idgen.machine.guarder.safe-guard-duration ${safeGuardMs} ms, less min(10 s, a tenth))`);
    }
  }
  return config;
}
