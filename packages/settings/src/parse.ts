// Value parsers for settings. Each throws a plain Error saying what form is expected; the loader adds the name.

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `15m`, `3H`, `10s`, `500ms`, `1d`, or a bare number of milliseconds → milliseconds. */
export function parseDuration(raw: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(raw);
  if (!m) throw new Error(`"${raw}" is not a duration: use e.g. 500ms, 10s, 15m, 3H or 1d`);
  return Math.round(Number(m[1]) * DURATION_UNITS[(m[2] ?? "ms").toLowerCase()]);
}

/** `ms` as the largest unit that divides it (`60000` → `1m`), for messages. */
function durationText(ms: number): string {
  for (const unit of ["d", "h", "m", "s"]) if (ms % DURATION_UNITS[unit] === 0) return `${ms / DURATION_UNITS[unit]}${unit}`;
  return `${ms}ms`;
}

/** A duration parser that refuses values outside `min`..`max` (ms), saying the range. */
export function parseDurationBetween(min: number, max = Number.MAX_SAFE_INTEGER): (raw: string) => number {
  const range = max === Number.MAX_SAFE_INTEGER ? `at least ${durationText(min)}` : `from ${durationText(min)} to ${durationText(max)}`;
  return (raw) => {
    const ms = parseDuration(raw);
    if (ms < min || ms > max) throw new Error(`"${raw}" is out of range: use a duration ${range}`);
    return ms;
  };
}

const BYTE_UNITS: Record<string, number> = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 };

/** `1MiB`, `16MB`, `512KiB`, or a bare number of bytes → bytes. */
export function parseBytes(raw: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b|b)?\s*$/i.exec(raw);
  if (!m) throw new Error(`"${raw}" is not a size: use e.g. 1048576, 512KiB, 1MiB or 16MB`);
  return Math.floor(Number(m[1]) * BYTE_UNITS[(m[2] ?? "b").toLowerCase()]);
}

/** A size parser that refuses values outside `min`..`max` bytes, saying the range (a limit of 0 refuses everything). */
export function parseBytesBetween(min: number, max = Number.MAX_SAFE_INTEGER): (raw: string) => number {
  const range = max === Number.MAX_SAFE_INTEGER ? `at least ${min} byte${min === 1 ? "" : "s"}` : `from ${min} to ${max} bytes`;
  return (raw) => {
    const bytes = parseBytes(raw);
    if (bytes < min || bytes > max) throw new Error(`"${raw}" is out of range: use a size ${range}`);
    return bytes;
  };
}

/**
 * The longest delay a timer takes (2^31 − 1 ms, about 24.8 days): a duration setting that becomes a timer is bounded by
 * it, since Node runs a longer one after 1 ms (a heartbeat of 25 days sent ~900 a second).
 */
export const LONGEST_TIMER_MS = 2_147_483_647;

export function parseBoolean(raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (v === "true" || v === "1" || v === "yes") return true;
  if (v === "false" || v === "0" || v === "no") return false;
  throw new Error(`"${raw}" is not a boolean: use true or false`);
}

export function parseInteger(min: number, max = Number.MAX_SAFE_INTEGER): (raw: string) => number {
  return (raw) => {
    const n = /^\s*-?\d+\s*$/.test(raw) ? Number(raw) : NaN; // plain decimal only: no "", "0x10" or "1e3"
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`"${raw}" is not a whole number from ${min} to ${max}`);
    return n;
  };
}

export function parseEnum<T extends string>(...allowed: T[]): (raw: string) => T {
  return (raw) => {
    const v = raw.trim() as T;
    if (!allowed.includes(v)) throw new Error(`"${raw}" is not one of ${allowed.join(", ")}`);
    return v;
  };
}
