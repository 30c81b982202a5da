import type { RedisClient } from "@gov/redis";
import { pino } from "pino";
import { MachineLease, redisMachineIdDistributor, type IdGenLogger } from "../src/index.js";

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export const LEVEL = { debug: 20, info: 30, warn: 40, error: 50 } as const;

/** A real pino logger (debug level) writing JSON lines into memory, so tests assert what operators see. */
export function captureLogs(): { logger: IdGenLogger; lines: LogLine[]; find(level: keyof typeof LEVEL, msg: string): LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino({ name: "gov.idgen", level: "debug" }, { write: (s: string) => void lines.push(JSON.parse(s) as LogLine) });
  return { logger, lines, find: (level, msg) => lines.filter((l) => l.level === LEVEL[level] && l.msg === msg) };
}

/** A wall clock that can be shifted (also backwards) while still ticking with real time. */
export function shiftableClock(): { now(): number; shift(ms: number): void } {
  let offset = 0;
  return { now: () => Date.now() + offset, shift: (ms) => void (offset += ms) };
}

/** A monotonic clock the test moves by hand. */
export function manualMonotonic(): { now: () => number; advance(ms: number): void } {
  let t = 1_000;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

export async function waitUntil(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

let seq = 0;
/** A namespace no other test uses (tests share the Redis servers). */
export function uniqueNamespace(prefix: string): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${seq++}`;
}

/**
 * Acquires test leases on `client`'s Redis: `machineBit` bits of machine id, renewed only when a test says so, logs
 * captured (and dropped); `extra` overrides any option.
 */
export function redisLeases(client: () => RedisClient, machineBit: number) {
  return (namespace: string, instanceId: string, extra: Partial<Parameters<typeof MachineLease.acquire>[0]> = {}) =>
    MachineLease.acquire({ namespace, instanceId, machineBit, distributor: redisMachineIdDistributor(client()), autoRenew: false, logger: captureLogs().logger, ...extra });
}
