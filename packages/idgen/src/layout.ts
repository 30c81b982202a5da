import { InvalidSettingError } from "./errors.js";

/** Bit layout of a Snowflake id, high to low: `timestamp | machineId | sequence`. */
export interface SnowflakeLayout {
  /** Epoch in ms that timestamps count from. */
  epoch: number;
  timestampBit: number;
  machineBit: number;
  sequenceBit: number;
}

/** 2019-12-24T16:00:00Z, the epoch CosId uses; ids from both libraries line up. */
export const IDGEN_EPOCH = 1577203200000;

/** 41/10/12: 1024 machines, 4096 ids per ms each, good until about 2089. Ids are `bigint`. */
export const MILLISECOND_LAYOUT: SnowflakeLayout = { epoch: IDGEN_EPOCH, timestampBit: 41, machineBit: 10, sequenceBit: 12 };

/** 41/3/9 = 53 bits: ids fit a JS `number` and JSON. Only 8 machines, 512 ids per ms each. */
export const SAFE_JS_LAYOUT: SnowflakeLayout = { epoch: IDGEN_EPOCH, timestampBit: 41, machineBit: 3, sequenceBit: 9 };

export function totalBits(l: SnowflakeLayout): number {
  return l.timestampBit + l.machineBit + l.sequenceBit;
}

export function isSafeJavascript(l: SnowflakeLayout): boolean {
  return totalBits(l) <= 53;
}

/** Rejects layouts that do not fit 63 bits (sign bit stays 0) or have empty parts. */
export function validateLayout(l: SnowflakeLayout, maxBits = 63): void {
  for (const k of ["timestampBit", "machineBit", "sequenceBit"] as const) {
    if (!Number.isInteger(l[k]) || l[k] < 0 || l[k] > 63) throw new InvalidSettingError(k, `must be an integer 0..63, got ${l[k]}`);
  }
  if (l.timestampBit < 1 || l.sequenceBit < 1) throw new InvalidSettingError("timestampBit/sequenceBit", "must be at least 1");
  if (totalBits(l) > maxBits) throw new InvalidSettingError("layout", `timestampBit+machineBit+sequenceBit = ${totalBits(l)} exceeds ${maxBits}`);
  if (!Number.isSafeInteger(l.epoch) || l.epoch < 0) throw new InvalidSettingError("epoch", `must be a non-negative ms timestamp, got ${l.epoch}`);
}

/** The parts of an id. */
export interface SnowflakeParts {
  timestamp: number;
  machineId: number;
  sequence: number;
}

export function parseSnowflake(id: bigint | number, l: SnowflakeLayout): SnowflakeParts {
  const v = BigInt(id);
  const sequence = Number(v & ((1n << BigInt(l.sequenceBit)) - 1n));
  const machineId = Number((v >> BigInt(l.sequenceBit)) & ((1n << BigInt(l.machineBit)) - 1n));
  const timestamp = Number(v >> BigInt(l.sequenceBit + l.machineBit)) + l.epoch;
  return { timestamp, machineId, sequence };
}

export function composeSnowflake(p: SnowflakeParts, l: SnowflakeLayout): bigint {
  return (
    (BigInt(p.timestamp - l.epoch) << BigInt(l.machineBit + l.sequenceBit)) |
    (BigInt(p.machineId) << BigInt(l.sequenceBit)) |
    BigInt(p.sequence)
  );
}
