import { InvalidIdError } from "../errors.js";
import { composeSnowflake, parseSnowflake, type SnowflakeLayout } from "../layout.js";
import type { IdConverter } from "./converter.js";

export interface FriendlyOptions {
  /** Zero-pad machine id and sequence to the decimal width of their maximum. Default false. */
  padStart?: boolean;
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/** `yyyyMMddHHmmssSSS` in **UTC** (pinned so ids read the same on every host). */
function formatUtc(ms: number): string {
  const d = new Date(ms);
  return `${d.getUTCFullYear()}${pad2(d.getUTCMonth() + 1)}${pad2(d.getUTCDate())}${pad2(d.getUTCHours())}${pad2(d.getUTCMinutes())}${pad2(d.getUTCSeconds())}${String(d.getUTCMilliseconds()).padStart(3, "0")}`;
}

/**
 * Readable Snowflake ids: `yyyyMMddHHmmssSSS-<machineId>-<sequence>` (UTC), e.g. `20210623131730192-1-0`.
 * Round-trips: `asId` checks each part's range against the layout.
 */
export function friendlyConverter(layout: SnowflakeLayout, options: FriendlyOptions = {}): IdConverter {
  const padStart = options.padStart ?? false;
  const maxMachine = 2 ** layout.machineBit - 1;
  const maxSeq = 2 ** layout.sequenceBit - 1;
  const machineCharSize = String(maxMachine).length;
  const sequenceCharSize = String(maxSeq).length;
  return {
    kind: "SnowflakeFriendlyIdConverter",
    asString(id) {
      const p = parseSnowflake(id, layout);
      const m = padStart ? String(p.machineId).padStart(machineCharSize, "0") : String(p.machineId);
      const s = padStart ? String(p.sequence).padStart(sequenceCharSize, "0") : String(p.sequence);
      return `${formatUtc(p.timestamp)}-${m}-${s}`;
    },
    asId(value) {
      const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{3})-(\d+)-(\d+)$/.exec(value);
      if (!m) throw new InvalidIdError(`"${value}" is not a friendly id (yyyyMMddHHmmssSSS-machine-sequence)`);
      const ts = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6], +m[7]);
      // Date.UTC rolls month 13, February 30 or hour 25 over into a real date: only a time asString writes is an id
      if (!Number.isFinite(ts) || formatUtc(ts) !== value.slice(0, 17)) throw new InvalidIdError(`"${value}": ${value.slice(0, 17)} is not a date and time (yyyyMMddHHmmssSSS, UTC)`);
      const machineId = Number(m[8]);
      const sequence = Number(m[9]);
      if (ts < layout.epoch || ts - layout.epoch > 2 ** layout.timestampBit - 1) throw new InvalidIdError(`"${value}": time outside the layout`);
      if (machineId > maxMachine) throw new InvalidIdError(`"${value}": machine id above ${maxMachine}`);
      if (sequence > maxSeq) throw new InvalidIdError(`"${value}": sequence above ${maxSeq}`);
      return composeSnowflake({ timestamp: ts, machineId, sequence }, layout);
    },
    describe: () => ({ kind: "SnowflakeFriendlyIdConverter", padStart, machineCharSize, sequenceCharSize, zone: "UTC" }),
  };
}
