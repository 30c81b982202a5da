import { pino, type Logger as PinoLogger } from "pino";

export type Logger = PinoLogger;

/** pino JSON logs with levels; GOV_LOG_LEVEL (or LOG_LEVEL) sets the level, default info. */
export function createLogger(name: string, level = process.env.GOV_LOG_LEVEL ?? process.env.LOG_LEVEL ?? "info"): Logger {
  return pino({ name, level });
}
