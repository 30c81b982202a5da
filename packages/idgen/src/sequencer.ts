import { channels, publish } from "./channels.js";
import type { Clock } from "./clock.js";
import { ClockBackwardsException, ClockStalledError, ClockTooManyBackwardsException } from "./errors.js";
import type { IdGenLogger } from "./logger.js";

export interface SequencerOptions {
  /** Generator name, used in logs and events. */
  name: string;
  clock: Clock;
  logger: IdGenLogger;
  sequenceBit: number;
  /** Reset the sequence on a new tick only at or above this value (default `2^(sequenceBit−1) − 1`). */
  sequenceResetThreshold?: number;
  /** Clock backwards by at most this many ms is waited out with a busy spin (default 1 ms). */
  spinThresholdMs?: number;
  /** Clock backwards by more than this is treated as broken, even by the async path (default 500 ms). */
  brokenThresholdMs?: number;
}

/** Real time a synchronous spin may take before we give up; keeps the event loop responsive. */
const MAX_SPIN_MS = 5;

/**
 * The per-tick sequence shared by Snowflake and composite generators.
 *
 * Policy (as CosId): the sequence is *not* reset on every new millisecond, only when the tick advanced and
 * the sequence reached half its range; the low bits keep cycling under light load, so `id % n` sharding stays
 * even. When the sequence wraps inside one tick we spin to the next tick (≤ 1 ms).
 */
export class TickSequencer {
  lastTimestamp = -1;
  sequence = 0;
  clockBackwardsCount = 0;
  readonly maxSequence: number;
  readonly resetThreshold: number;
  readonly spinThresholdMs: number;
  readonly brokenThresholdMs: number;
  private warnedFor = -1;

  constructor(private readonly opts: SequencerOptions) {
    this.maxSequence = 2 ** opts.sequenceBit - 1;
    this.resetThreshold = opts.sequenceResetThreshold ?? 2 ** (opts.sequenceBit - 1) - 1;
    this.spinThresholdMs = opts.spinThresholdMs ?? 1;
    this.brokenThresholdMs = opts.brokenThresholdMs ?? 500;
  }

  /**
   * How far the clock is behind the last tick this sequencer issued ids in (≤ 0 when it is not). Past
   * `brokenThresholdMs` every call is refused until the clock has caught up — after a large backwards step, for as
   * long as the step was — which a monitor must report: the process cannot issue ids meanwhile.
   */
  behindMs(): number {
    return this.lastTimestamp - this.opts.clock.now();
  }

  /** Advances and returns the sequence; `lastTimestamp` is then the tick the id belongs to. */
  next(): number {
    let now = this.opts.clock.now();
    const last = this.lastTimestamp;
    if (now < last) now = this.waitBackwardsSync(now);
    const base = now > last && this.sequence >= this.resetThreshold ? 0 : this.sequence;
    const seq = (base + 1) & this.maxSequence;
    // the sequence wrapped inside this tick: move to the next one first. The state is committed only afterwards: a
    // spin that gives up (ClockStalledError) must leave the sequence where it was, or the next call in this same tick
    // would start again from 1 and repeat ids already issued in it.
    if (seq === 0 && now <= last) now = this.spinPast(last);
    this.sequence = seq;
    this.lastTimestamp = now;
    return seq;
  }

  /** As {@link next}, but waits out a backwards clock (up to the broken threshold) without blocking. */
  async nextAsync(): Promise<number> {
    for (;;) {
      try {
        return this.next();
      } catch (err) {
        await this.waitOut(err);
      }
    }
  }

  /**
   * For async callers that got `err` from {@link next}: rethrows anything but a `ClockBackwardsException`, else waits
   * (a timer, not a spin) until the clock may have caught up. The caller then retries `next()` and must read
   * `lastTimestamp` in the same synchronous step as that `next()`: any await in between lets other callers move the
   * sequencer to another tick.
   */
  async waitOut(err: unknown): Promise<void> {
    if (!(err instanceof ClockBackwardsException)) throw err;
    publish(channels.clockBackwards, () => ({ name: this.opts.name, backwardsMs: err.backwardsMs, lastTimestamp: this.lastTimestamp, action: "sleep" }));
    await new Promise((r) => setTimeout(r, err.backwardsMs));
  }

  private waitBackwardsSync(now: number): number {
    const last = this.lastTimestamp;
    const backwards = last - now;
    if (this.warnedFor !== last) {
      // one WARN, and one count, per episode: not per caller retrying during it (the metric read 1,000 for one step back)
      this.warnedFor = last;
      this.clockBackwardsCount++;
      this.opts.logger.warn({ generator: this.opts.name, backwardsMs: backwards, lastTimestamp: last }, "Detected clock backwards");
    }
    if (backwards > this.brokenThresholdMs) {
      publish(channels.clockBackwards, () => ({ name: this.opts.name, backwardsMs: backwards, lastTimestamp: last, action: "broken" }));
      throw new ClockTooManyBackwardsException(backwards, this.brokenThresholdMs, last);
    }
    if (backwards > this.spinThresholdMs) {
      publish(channels.clockBackwards, () => ({ name: this.opts.name, backwardsMs: backwards, lastTimestamp: last, action: "refused" }));
      throw new ClockBackwardsException(backwards, last);
    }
    publish(channels.clockBackwards, () => ({ name: this.opts.name, backwardsMs: backwards, lastTimestamp: last, action: "spin" }));
    const caughtUp = this.spinUntil(last - 1);
    if (caughtUp < last) throw new ClockBackwardsException(last - caughtUp, last);
    return caughtUp;
  }

  /** Busy-waits until the clock shows a tick after `last`. */
  private spinPast(last: number): number {
    const now = this.spinUntil(last);
    if (now <= last) throw new ClockStalledError(`Clock did not advance past ${last} within ${MAX_SPIN_MS} ms; generator [${this.opts.name}] cannot issue more ids in this tick`);
    return now;
  }

  private spinUntil(last: number): number {
    const clock = this.opts.clock;
    const giveUpAt = performance.now() + MAX_SPIN_MS;
    for (;;) {
      const now = clock.now();
      if (now > last) return now;
      // read the clock again after the bound: the process may have been descheduled between the two reads
      if (performance.now() >= giveUpAt) return clock.now();
    }
  }
}
