/**
 * Every error the library throws on purpose. Each has a stable `code` (listed in the README's Errors table;
 * a test keeps the two in step) so callers and the monitor can branch without `instanceof` across copies.
 */

export type IdGenErrorCode =
  | "MACHINE_ID_LOST"
  | "MACHINE_ID_OVERFLOW"
  | "LEASE_REQUEST_TIMEOUT"
  | "LEASE_UNCONFIRMED"
  | "CLOCK_BACKWARDS"
  | "CLOCK_TOO_MANY_BACKWARDS"
  | "CLOCK_STALLED"
  | "TIMESTAMP_OVERFLOW"
  | "SEGMENT_EXHAUSTED"
  | "INVALID_SETTING"
  | "INVALID_ID"
  | "GENERATOR_NOT_FOUND";

/** Base class of all library errors. */
export class IdGenError extends Error {
  readonly code: IdGenErrorCode;
  constructor(code: IdGenErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = "IdGenError";
  }
}

/**
 * The machine-id lease is gone: either the store said another owner holds it, or no renewal succeeded for
 * `T − min(10 s, T/10)`. Snowflake and composite generators throw it until the lease is re-distributed.
 */
export class MachineIdLostException extends IdGenError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("MACHINE_ID_LOST", message, options);
    this.name = "MachineIdLostException";
  }
}

/** Every machine id of the namespace is held by a live lease (none reverted, none stale). */
export class MachineIdOverflowException extends IdGenError {
  constructor(message: string) {
    super("MACHINE_ID_OVERFLOW", message);
    this.name = "MachineIdOverflowException";
  }
}

/**
 * A lease request (distribute or renew) got no answer within `requestTimeoutMs`. For a renewal this is a failed
 * renewal (`Guard Failed`, health DOWN); the lease stays usable until its stop deadline.
 */
export class LeaseRequestTimeoutError extends IdGenError {
  constructor(message: string) {
    super("LEASE_REQUEST_TIMEOUT", message);
    this.name = "LeaseRequestTimeoutError";
  }
}

/**
 * Retriable: the wall clock passed the lease's stop deadline while the monotonic clock did not (the host was
 * suspended, or the clock stepped forward), so the lease may have been recycled by another process meanwhile. A
 * renewal is under way; ids resume once it confirms the lease is still ours (`nextIdAsync()` waits for it), and turn
 * into `MachineIdLostException` if the store says it is gone.
 */
export class LeaseUnconfirmedError extends IdGenError {
  constructor(message: string) {
    super("LEASE_UNCONFIRMED", message);
    this.name = "LeaseUnconfirmedError";
  }
}

/**
 * The clock is behind the last issued timestamp by more than the synchronous spin threshold.
 * `nextId()` refuses rather than block the event loop; `nextIdAsync()` waits instead.
 */
export class ClockBackwardsException extends IdGenError {
  readonly backwardsMs: number;
  constructor(backwardsMs: number, lastTimestamp: number) {
    super("CLOCK_BACKWARDS", `Clock moved backwards by ${backwardsMs} ms (lastTimestamp ${lastTimestamp}); refusing to generate an id synchronously — retry, or use nextIdAsync()`);
    this.name = "ClockBackwardsException";
    this.backwardsMs = backwardsMs;
  }
}

/** The clock is behind by more than the broken threshold; even the async path gives up. */
export class ClockTooManyBackwardsException extends IdGenError {
  readonly backwardsMs: number;
  constructor(backwardsMs: number, brokenThresholdMs: number, lastTimestamp: number) {
    super("CLOCK_TOO_MANY_BACKWARDS", `Clock moved backwards by ${backwardsMs} ms, more than the broken threshold of ${brokenThresholdMs} ms (lastTimestamp ${lastTimestamp})`);
    this.name = "ClockTooManyBackwardsException";
    this.backwardsMs = backwardsMs;
  }
}

/** The clock did not advance to the next tick within the spin bound (a frozen or injected clock). */
export class ClockStalledError extends IdGenError {
  constructor(message: string) {
    super("CLOCK_STALLED", message);
    this.name = "ClockStalledError";
  }
}

/** `now − epoch` no longer fits the timestamp bits of the layout. */
export class TimestampOverflowException extends IdGenError {
  constructor(message: string) {
    super("TIMESTAMP_OVERFLOW", message);
    this.name = "TimestampOverflowException";
  }
}

/** A segment chain has no reserved id left (the store is failing or cannot keep up). */
export class SegmentExhaustedError extends IdGenError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("SEGMENT_EXHAUSTED", message, options);
    this.name = "SegmentExhaustedError";
  }
}

/** A setting (or option) has a value the library cannot use; the message names the setting. */
export class InvalidSettingError extends IdGenError {
  readonly setting: string;
  constructor(setting: string, message: string) {
    super("INVALID_SETTING", `Invalid setting ${setting}: ${message}`);
    this.name = "InvalidSettingError";
    this.setting = setting;
  }
}

/** A string could not be converted back to an id (bad alphabet, prefix, range). */
export class InvalidIdError extends IdGenError {
  constructor(message: string) {
    super("INVALID_ID", message);
    this.name = "InvalidIdError";
  }
}

/** The registry has no generator under that name. */
export class GeneratorNotFoundError extends IdGenError {
  readonly generatorName: string;
  constructor(name: string) {
    super("GENERATOR_NOT_FOUND", `Not found ID generator named [${name}]`);
    this.name = "GeneratorNotFoundError";
    this.generatorName = name;
  }
}

/** All error classes, for the README catalogue test and for monitors mapping codes to metrics labels. */
export const errorClasses = [
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
] as const;
