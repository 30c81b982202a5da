import { systemClock, type Clock } from "./clock.js";
import type { IdConverter } from "./converters/converter.js";
import { radix62Converter } from "./converters/radix.js";
import { TimestampOverflowException, InvalidSettingError, LeaseUnconfirmedError } from "./errors.js";
import type { GeneratorDescription, IdGenerator } from "./generator.js";
import { isSafeJavascript, MILLISECOND_LAYOUT, SAFE_JS_LAYOUT, validateLayout, type SnowflakeLayout } from "./layout.js";
import { defaultIdGenLogger, type IdGenLogger } from "./logger.js";
import { fixedMachineId, type MachineIdSource } from "./machine/machine-id-source.js";
import { TickSequencer } from "./sequencer.js";

export interface SnowflakeOptions {
  /** Registry / log name. Default `snowflake`. */
  name?: string;
  /** Bit layout; default 41/10/12 with {@link IDGEN_EPOCH}. */
  layout?: Partial<SnowflakeLayout>;
  /** A fixed machine id or a lease (`MachineLease`). */
  machine: number | MachineIdSource;
  clock?: Clock;
  logger?: IdGenLogger;
  converter?: IdConverter;
  sequenceResetThreshold?: number;
  /** Backwards steps up to this are spun out synchronously (default 1 ms). */
  spinThresholdMs?: number;
  /** Backwards steps above this fail even in `nextIdAsync` (default 500 ms). */
  brokenThresholdMs?: number;
}

/** Shared machinery of the bigint and number Snowflake generators. */
abstract class SnowflakeBase<T extends bigint | number> implements IdGenerator {
  readonly name: string;
  abstract readonly kind: string;
  readonly layout: SnowflakeLayout;
  readonly converter: IdConverter;
  readonly sequencer: TickSequencer;
  protected readonly source: MachineIdSource;
  protected tick = -1;
  protected sourceVersion = -1;
  protected machineId = -1;
  private readonly maxTimestamp: number;
  private issued = 0;

  constructor(opts: SnowflakeOptions, defaults: SnowflakeLayout, maxBits: number) {
    this.name = opts.name ?? "snowflake";
    this.layout = { ...defaults, ...opts.layout };
    validateLayout(this.layout, maxBits);
    this.source = typeof opts.machine === "number" ? fixedMachineId(opts.machine) : opts.machine;
    this.checkMachineId(this.source.machineId);
    this.maxTimestamp = 2 ** this.layout.timestampBit - 1;
    this.converter = opts.converter ?? radix62Converter();
    this.sequencer = new TickSequencer({
      name: this.name,
      clock: opts.clock ?? systemClock,
      logger: opts.logger ?? defaultIdGenLogger(),
      sequenceBit: this.layout.sequenceBit,
      sequenceResetThreshold: opts.sequenceResetThreshold,
      spinThresholdMs: opts.spinThresholdMs,
      brokenThresholdMs: opts.brokenThresholdMs,
    });
  }

  get generatedCount(): number {
    return this.issued;
  }

  /**
   * Next id. Throws `MachineIdLostException`, `LeaseUnconfirmedError` or `ClockBackwardsException` (both retriable; use
   * `nextIdAsync`) or `TimestampOverflowException`.
   */
  nextId(): T {
    const seq = this.sequencer.next();
    const ts = this.sequencer.lastTimestamp;
    // Per-tick work (lease check, overflow check, high bits) runs once per ms, not once per id.
    if (ts !== this.tick) this.onTick(ts);
    this.issued++;
    return this.compose(seq);
  }

  /**
   * As `nextId`, but waits out a backwards clock (up to the broken threshold) and a lease check after a wall-clock jump
   * (one renewal) instead of throwing.
   */
  async nextIdAsync(): Promise<T> {
    // The sequence and its tick are read in one synchronous step (nextId): awaiting between them would let other
    // callers move the sequencer to a later tick, and the id would carry this sequence with that tick — a repeat.
    for (;;) {
      try {
        return this.nextId();
      } catch (err) {
        // a wall-clock jump past the lease's stop deadline: wait for the renewal that checks the lease, then retry
        const check = err instanceof LeaseUnconfirmedError ? this.source.confirmation?.() : undefined;
        if (check) await check;
        else await this.sequencer.waitOut(err);
      }
    }
  }

  nextIdAsString(): string {
    return this.converter.asString(this.nextId());
  }

  describe(): GeneratorDescription {
    return {
      kind: this.kind,
      converter: this.converter.describe(),
      state: {
        machineId: this.source.machineId,
        lastTimestamp: this.sequencer.lastTimestamp,
        epoch: this.layout.epoch,
        timestampBit: this.layout.timestampBit,
        machineBit: this.layout.machineBit,
        sequenceBit: this.layout.sequenceBit,
        safeJavascript: isSafeJavascript(this.layout),
        clockBackwards: this.sequencer.clockBackwardsCount,
      },
    };
  }

  protected abstract compose(seq: number): T;
  protected abstract setHigh(diff: number, machineId: number): void;

  private onTick(ts: number): void {
    this.source.assertUsable(ts);
    if (this.source.version !== this.sourceVersion) {
      this.checkMachineId(this.source.machineId);
      this.machineId = this.source.machineId;
      this.sourceVersion = this.source.version;
    }
    const diff = ts - this.layout.epoch;
    if (diff > this.maxTimestamp || diff < 0) {
      throw new TimestampOverflowException(`epoch:[${this.layout.epoch}] - diffTimestamp:[${diff}] can't be greater than maxTimestamp:[${this.maxTimestamp}]`);
    }
    this.setHigh(diff, this.machineId);
    this.tick = ts;
  }

  private checkMachineId(id: number): void {
    const max = 2 ** this.layout.machineBit - 1;
    if (!Number.isInteger(id) || id < 0 || id > max) throw new InvalidSettingError("machineId", `${id} is outside 0..${max} for ${this.layout.machineBit} machine bits`);
  }
}

const SEQ_BIGINT: bigint[] = [];

/** Snowflake with bigint ids (default 41/10/12). */
export class SnowflakeId extends SnowflakeBase<bigint> {
  readonly kind = "SnowflakeId";
  private high = 0n;
  private readonly seqBig: bigint[];

  constructor(opts: SnowflakeOptions) {
    super(opts, MILLISECOND_LAYOUT, 63);
    // cached BigInt per sequence value: avoids one BigInt allocation per id on the hot path
    const n = 2 ** Math.min(this.layout.sequenceBit, 16);
    while (SEQ_BIGINT.length < n) SEQ_BIGINT.push(BigInt(SEQ_BIGINT.length));
    this.seqBig = SEQ_BIGINT;
  }

  protected compose(seq: number): bigint {
    return this.high | (this.seqBig[seq] ?? BigInt(seq));
  }

  protected setHigh(diff: number, machineId: number): void {
    const { machineBit, sequenceBit } = this.layout;
    this.high = (BigInt(diff) << BigInt(machineBit + sequenceBit)) | (BigInt(machineId) << BigInt(sequenceBit));
  }
}

/** Snowflake with `number` ids for layouts of ≤ 53 bits (default 41/3/9); JSON-safe. */
export class SafeSnowflakeId extends SnowflakeBase<number> {
  readonly kind = "SafeJavaScriptSnowflakeId";
  private high = 0;

  constructor(opts: SnowflakeOptions) {
    super(opts, SAFE_JS_LAYOUT, 53);
  }

  protected compose(seq: number): number {
    return this.high + seq;
  }

  protected setHigh(diff: number, machineId: number): void {
    // multiplication, not <<: JS shifts are 32-bit
    const { machineBit, sequenceBit } = this.layout;
    this.high = diff * 2 ** (machineBit + sequenceBit) + machineId * 2 ** sequenceBit;
  }
}
