import { InvalidSettingError } from "./errors.js";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses `500ms`, `10s`, `1m`, `3H`, `2d` (unit case-insensitive) or a bare number of milliseconds.
 * `setting` names the setting in the error so a bad value points at what to fix.
 */
export function parseDuration(value: string, setting: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(value);
  if (!m) throw new InvalidSettingError(setting, `"${value}" is not a duration (use e.g. 500ms, 10s, 1m, 3H)`);
  const ms = Number(m[1]) * UNIT_MS[(m[2] ?? "ms").toLowerCase()];
  if (!Number.isFinite(ms)) throw new InvalidSettingError(setting, `"${value}" is too large`);
  return Math.round(ms);
}
