import { channels, publish } from "../channels.js";
import { systemClock, type Clock } from "../clock.js";
import type { IdConverter } from "../converters/converter.js";
import { radix62Converter } from "../converters/radix.js";
import { SegmentExhaustedError } from "../errors.js";
import type { GeneratorDescription, IdGenerator } from "../generator.js";
import { defaultIdGenLogger, type IdGenLogger } from "../logger.js";
import type { SegmentDistributor } from "./distributor.js";

export interface SegmentChainOptions {
  distributor: SegmentDistributor;
  /** Registry / log name; default `<namespace>.<name>` of the distributor. */
  name?: string;
  /** Ids per segment (default 10). Raise it for hot generators: each prefetch costs one store round trip. */
  step?: number;
  /** Spare segments kept reserved ahead of the current one (default 2). */
  safeDistance?: number;
  /** Background top-up period (default 1 s). */
  prefetchPeriodMs?: number;
  /** Hunger within this window keeps the distance expanded; after it the distance shrinks (default 5 s). */
  hungerWindowMs?: number;
  /** Cap of the expanded distance, in segments (default 1,000,000). */
  maxPrefetchDistance?: number;
  /** Wait this long before retrying a failed prefetch on demand (default 200 ms). */
  failureBackoffMs?: number;
  converter?: IdConverter;
  logger?: IdGenLogger;
  clock?: Clock;
}

interface Block {
  next: number;
  max: number;
  fetchTime: number;
}

/**
 * Segment-chain generator: ids are consecutive numbers taken from ranges reserved in a shared counter.
 * The hot path is one comparison and one increment. A background prefetch keeps `safeDistance` spare segments
 * reserved; when callers reach the last reserved segment ("hunger") the distance doubles, and it halves back
 * once hunger stops. If the store fails, generation continues from the reserved ranges until they run out.
 */
export class SegmentChainId implements IdGenerator {
  readonly kind = "SegmentChainId";
  readonly name: string;
  readonly converter: IdConverter;
  readonly step: number;
  readonly safeDistance: number;
  private readonly o: Required<Omit<SegmentChainOptions, "name" | "converter" | "step" | "safeDistance">>;
  // current segment: ids (segOffset, segMax], `seq` = last issued
  private seq = 0;
  private segMax = 0;
  private segOffset = 0;
  private segFetchTime = 0;
  private blocks: Block[] = [];
  private reserved = 0;
  private prefetchDistance: number;
  private hungry = false;
  private lastHungerAt = -Infinity;
  private hungerCount = 0;
  private issued = 0;
  private fetching: Promise<void> | undefined;
  private failures = 0;
  private totalFailures = 0;
  private lastFailure: unknown;
  private lastFailureAt = 0;
  private lastWarnAt = 0;
  private wakeQueued = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(opts: SegmentChainOptions) {
    this.name = opts.name ?? `${opts.distributor.namespace}.${opts.distributor.name}`;
    this.step = opts.step ?? 10;
    this.safeDistance = opts.safeDistance ?? 2;
    if (!Number.isSafeInteger(this.step) || this.step < 1) throw new RangeError(`step must be a positive integer, got ${this.step}`);
    if (!Number.isSafeInteger(this.safeDistance) || this.safeDistance < 1) throw new RangeError(`safeDistance must be a positive integer, got ${this.safeDistance}`);
    this.converter = opts.converter ?? radix62Converter();
    this.o = {
      distributor: opts.distributor,
      prefetchPeriodMs: opts.prefetchPeriodMs ?? 1000,
      hungerWindowMs: opts.hungerWindowMs ?? 5000,
      maxPrefetchDistance: opts.maxPrefetchDistance ?? 1_000_000,
      failureBackoffMs: opts.failureBackoffMs ?? 200,
      logger: opts.logger ?? defaultIdGenLogger(),
      clock: opts.clock ?? systemClock,
    };
    this.prefetchDistance = this.safeDistance;
  }

  /** Creates the chain, reserves the first segments and starts the background prefetch. */
  static async create(opts: SegmentChainOptions): Promise<SegmentChainId> {
    const chain = new SegmentChainId(opts);
    await chain.start();
    return chain;
  }

  /** Reserves the first segments (throws if the store fails) and starts the prefetch timer. */
  async start(): Promise<void> {
    await this.prefetch();
    if (this.failures > 0) throw this.exhausted();
    this.timer ??= setInterval(() => void this.prefetch(), this.o.prefetchPeriodMs);
    this.timer.unref();
  }

  get generatedCount(): number {
    return this.issued;
  }

  /** Next id. Throws `SegmentExhaustedError` when nothing is reserved (use `nextIdAsync` to wait for a prefetch). */
  nextId(): number {
    if (this.seq < this.segMax) {
      this.issued++;
      return ++this.seq;
    }
    return this.nextSegment();
  }

  /** As `nextId`, but waits for a prefetch when the chain is empty; rejects if that prefetch fails. */
  async nextIdAsync(): Promise<number> {
    for (;;) {
      if (this.seq < this.segMax || this.reserved > 0) return this.nextId();
      if (this.stopped) throw this.exhausted();
      const before = this.totalFailures;
      await this.prefetch();
      if (this.totalFailures !== before && this.reserved === 0) throw this.exhausted();
    }
  }

  nextIdAsString(): string {
    return this.converter.asString(this.nextId());
  }

  /** Ids reserved and not yet issued (current segment + spare segments). */
  get runway(): number {
    return this.segMax - this.seq + this.reserved;
  }

  describe(): GeneratorDescription {
    return {
      kind: this.kind,
      converter: this.converter.describe(),
      state: {
        currentSegment: {
          offset: this.segOffset,
          maxId: this.segMax,
          sequence: this.seq,
          step: this.step,
          fetchTime: this.segFetchTime,
          available: this.seq < this.segMax,
        },
        runway: this.runway,
        safeDistance: this.safeDistance,
        prefetchDistance: this.prefetchDistance,
        hungerCount: this.hungerCount,
        prefetchFailures: this.failures,
        prefetchFailuresTotal: this.totalFailures,
        lastPrefetchError: this.failures > 0 ? String(this.lastFailure) : null,
        stopped: this.stopped,
      },
    };
  }

  /** Stops background prefetch; reserved ids can still be taken. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private nextSegment(): number {
    const block = this.blocks[0];
    if (!block) {
      this.markHunger();
      throw this.exhausted();
    }
    this.segOffset = block.next;
    this.segMax = Math.min(block.next + this.step, block.max);
    this.segFetchTime = block.fetchTime;
    this.seq = this.segOffset;
    this.reserved -= this.segMax - this.segOffset;
    block.next = this.segMax;
    if (block.next >= block.max) this.blocks.shift();
    if (this.reserved === 0) this.markHunger(); // on the last reserved segment: prefetch did not keep up
    else if (this.reserved < this.safeDistance * this.step) this.wake();
    this.issued++;
    return ++this.seq;
  }

  private markHunger(): void {
    // Dry because the store is failing, not because demand outran a working prefetch: a larger distance would not
    // have helped, and doubling it at every failed retry would log "Hunger" (whose fix is a larger step) through the
    // whole outage and reserve a huge block once the store is back.
    if (this.failures === 0) {
      this.hungry = true;
      this.hungerCount++;
      this.lastHungerAt = this.o.clock.now();
    }
    this.wake();
  }

  /** Prefetch soon, outside the caller's stack (callers never wait on the store in `nextId`). */
  private wake(): void {
    if (this.wakeQueued || this.stopped) return;
    this.wakeQueued = true;
    const delay = this.failures > 0 ? Math.max(0, this.lastFailureAt + this.o.failureBackoffMs - this.o.clock.now()) : 0;
    const t = setTimeout(() => {
      this.wakeQueued = false;
      void this.prefetch();
    }, delay);
    t.unref();
  }

  /** One prefetch run (concurrent calls share it). Never throws; failures are logged and counted. */
  private prefetch(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.fetching ??= this.runPrefetch().finally(() => (this.fetching = undefined));
    return this.fetching;
  }

  private async runPrefetch(): Promise<void> {
    this.adjustDistance();
    const target = this.prefetchDistance * this.step;
    const segments = Math.ceil((target - this.reserved) / this.step);
    if (segments <= 0) return;
    const count = segments * this.step;
    const { logger, distributor, clock } = this.o;
    try {
      const maxId = await distributor.nextMaxId(count);
      this.blocks.push({ next: maxId - count, max: maxId, fetchTime: clock.now() });
      this.reserved += count;
      if (this.failures > 0) logger.info({ generator: this.name, failures: this.failures }, `AppendChain [${this.name}] - prefetch recovered`);
      this.failures = 0;
      logger.debug({ generator: this.name, offset: maxId - count, maxId, segments, runway: this.runway }, `AppendChain [${this.name}] - appended segments`);
      publish(channels.prefetch, () => ({ name: this.name, event: "appended", offset: maxId - count, maxId, segments, step: this.step, runway: this.runway }));
    } catch (err) {
      this.failures++;
      this.totalFailures++;
      this.lastFailure = err;
      this.lastFailureAt = clock.now();
      if (this.failures === 1) {
        logger.error({ generator: this.name, err, runway: this.runway }, `AppendChain [${this.name}] - prefetch failed`);
      } else if (this.failures === 2 || this.lastFailureAt - this.lastWarnAt >= 60_000) {
        // rate-limited: the first repeat, then at most once a minute
        this.lastWarnAt = this.lastFailureAt;
        logger.warn({ generator: this.name, failures: this.failures, runway: this.runway, err: String(err) }, "prefetch still failing");
      }
      publish(channels.prefetch, () => ({ name: this.name, event: "failed", failures: this.failures, runway: this.runway, error: String(err) }));
    }
  }

  private adjustDistance(): void {
    const { logger, clock } = this.o;
    const from = this.prefetchDistance;
    if (this.hungry) {
      this.hungry = false;
      this.prefetchDistance = Math.min(from * 2, this.o.maxPrefetchDistance);
      if (this.prefetchDistance !== from) {
        logger.info({ generator: this.name, from, to: this.prefetchDistance }, `Prefetch [${this.name}] - Hunger, Safety distance expansion`);
        publish(channels.prefetch, () => ({ name: this.name, event: "hunger", distance: this.prefetchDistance }));
      }
    } else if (from > this.safeDistance && clock.now() - this.lastHungerAt >= this.o.hungerWindowMs) {
      this.prefetchDistance = Math.max(Math.floor(from / 2), this.safeDistance);
      logger.info({ generator: this.name, from, to: this.prefetchDistance }, `Prefetch [${this.name}] - Full, Safety distance shrinks`);
      publish(channels.prefetch, () => ({ name: this.name, event: "shrink", distance: this.prefetchDistance }));
    }
  }

  private exhausted(): SegmentExhaustedError {
    if (this.stopped) return new SegmentExhaustedError(`Segment chain [${this.name}] is stopped and has no reserved ids left`);
    if (this.failures > 0) {
      return new SegmentExhaustedError(`Segment chain [${this.name}] ran out of reserved ids and the store is failing (${this.failures} prefetch failures): ${String(this.lastFailure)}`, { cause: this.lastFailure });
    }
    return new SegmentExhaustedError(`Segment chain [${this.name}] has no reserved ids right now; a prefetch is on its way — use nextIdAsync(), or raise step/safe-distance`);
  }
}
