import { systemClock, type Clock } from "./clock.js";
import { radix62Fixed } from "./converters/radix.js";
import { InvalidIdError, InvalidSettingError } from "./errors.js";
import type { GeneratorDescription, IdGenerator } from "./generator.js";
import { defaultIdGenLogger, type IdGenLogger } from "./logger.js";
import { fixedMachineId, type MachineIdSource } from "./machine/machine-id-source.js";
import { TickSequencer } from "./sequencer.js";

export interface CompositeOptions {
  /** Registry name; default `idgen`. */
  name?: string;
  machine: number | MachineIdSource;
  clock?: Clock;
  logger?: IdGenLogger;
  spinThresholdMs?: number;
  brokenThresholdMs?: number;
}

const TIMESTAMP_CHARS = 8; // 62^8 > 2^44: Unix ms until year 2527
const MACHINE_CHARS = 4; // 62^4 > 2^20
const SEQUENCE_CHARS = 3; // 62^3 > 2^16
const MACHINE_BIT = 20;
const SEQUENCE_BIT = 16;

/** The parts of a composite id. */
export interface CompositeParts {
  timestamp: number;
  machineId: number;
  sequence: number;
}

/**
 * Composite string ids: `timestamp(44 bit, Unix ms) | machineId(20) | sequence(16)`, each part radix-62
 * encoded at fixed width → 15 characters that sort by time. 65,536 ids per ms. String-only (no `nextId`),
 * stops with `MachineIdLostException` like Snowflake when its lease is lost.
 */
export class CompositeIdGenerator implements IdGenerator {
  readonly kind = "CompositeIdGenerator";
  readonly name: string;
  readonly sequencer: TickSequencer;
  private readonly source: MachineIdSource;
  private tick = -1;
  private prefix = "";
  private issued = 0;

  constructor(opts: CompositeOptions) {
    this.name = opts.name ?? "idgen";
    this.source = typeof opts.machine === "number" ? fixedMachineId(opts.machine) : opts.machine;
    this.sequencer = new TickSequencer({
      name: this.name,
      clock: opts.clock ?? systemClock,
      logger: opts.logger ?? defaultIdGenLogger(),
      sequenceBit: SEQUENCE_BIT,
      spinThresholdMs: opts.spinThresholdMs,
      brokenThresholdMs: opts.brokenThresholdMs,
    });
  }

  get generatedCount(): number {
    return this.issued;
  }

  nextIdAsString(): string {
    const seq = this.sequencer.next();
    const ts = this.sequencer.lastTimestamp;
    if (ts !== this.tick) this.onTick(ts);
    this.issued++;
    return this.prefix + radix62Fixed(seq, SEQUENCE_CHARS);
  }

  describe(): GeneratorDescription {
    return {
      kind: this.kind,
      converter: { kind: "Radix62CompositeConverter", timestampChars: TIMESTAMP_CHARS, machineChars: MACHINE_CHARS, sequenceChars: SEQUENCE_CHARS },
      state: { machineId: this.source.machineId, lastTimestamp: this.sequencer.lastTimestamp, machineBit: MACHINE_BIT, sequenceBit: SEQUENCE_BIT },
    };
  }

  private onTick(ts: number): void {
    this.source.assertUsable(ts);
    const m = this.source.machineId;
    if (m < 0 || m > 2 ** MACHINE_BIT - 1) throw new InvalidSettingError("machineId", `${m} is outside 0..${2 ** MACHINE_BIT - 1}`);
    this.prefix = radix62Fixed(ts, TIMESTAMP_CHARS) + radix62Fixed(m, MACHINE_CHARS);
    this.tick = ts;
  }
}

const DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

function decode62(s: string): number {
  let n = 0;
  for (const c of s) {
    const d = DIGITS.indexOf(c);
    if (d < 0) throw new InvalidIdError(`"${s}" has a character outside radix-62`);
    n = n * 62 + d;
  }
  return n;
}

/** Splits a composite id into its parts. */
export function parseCompositeId(id: string): CompositeParts {
  if (id.length !== TIMESTAMP_CHARS + MACHINE_CHARS + SEQUENCE_CHARS) throw new InvalidIdError(`"${id}" is not a 15-character composite id`);
  const parts = {
    timestamp: decode62(id.slice(0, TIMESTAMP_CHARS)),
    machineId: decode62(id.slice(TIMESTAMP_CHARS, TIMESTAMP_CHARS + MACHINE_CHARS)),
    sequence: decode62(id.slice(TIMESTAMP_CHARS + MACHINE_CHARS)),
  };
  // the characters hold more than the layout's bits (44/20/16): such a value is not an id this generator made
  if (parts.timestamp > 2 ** 44 - 1) throw new InvalidIdError(`"${id}": timestamp above 44 bits`);
  if (parts.machineId > 2 ** MACHINE_BIT - 1) throw new InvalidIdError(`"${id}": machine id above ${2 ** MACHINE_BIT - 1}`);
  if (parts.sequence > 2 ** SEQUENCE_BIT - 1) throw new InvalidIdError(`"${id}": sequence above ${2 ** SEQUENCE_BIT - 1}`);
  return parts;
}
