import { pino } from "pino";

/** The subset of a pino logger the library uses: `(obj, msg)` at four levels. */
export interface IdGenLogger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Name of the idgen root logger; set its level to `debug` to see distribution, renewal and prefetch. */
export const IDGEN_LOGGER_NAME = "gov.idgen";

let defaultLogger: IdGenLogger | undefined;

/** The shared default logger (pino, named `gov.idgen`, level from `IDGEN_LOG_LEVEL` or `info`). Created lazily. */
export function defaultIdGenLogger(): IdGenLogger {
  defaultLogger ??= pino({ name: IDGEN_LOGGER_NAME, level: process.env.IDGEN_LOG_LEVEL ?? "info" });
  return defaultLogger;
}
