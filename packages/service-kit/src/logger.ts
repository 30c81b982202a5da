import { pino, type DestinationStream, type Logger as PinoLogger } from "pino";
import { logLevelFromEnv } from "@gov/settings";

export type Logger = PinoLogger;

/**
 * Paths pino replaces with "***" before a line is written: credentials in request headers (access log, errors) and
 * any `password`/`token`/`secret` field one level down (e.g. an error's options), and the arguments of a failed Redis
 * command. URLs with passwords are redacted
 * where they are built (`redactRedisUrl`), since pino only redacts whole values.
 */
export const REDACTED_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  'req.headers["x-api-key"]',
  "headers.authorization",
  "headers.cookie",
  "password",
  "token",
  "secret",
  "*.password",
  "*.token",
  "*.secret",
  "*.accessToken",
  "*.refreshToken",
  // ioredis hangs the failed command on its errors, arguments included: a config write's are the content (secrets,
  // up to a MiB). The command's name is kept; an unexpected store error is logged whole, under `err`.
  "err.command.args",
];

/**
 * pino JSON lines on stdout (or `destination`), with levels; GOV_LOG_LEVEL (or LOG_LEVEL) sets the level, default info.
 */
export function createLogger(name: string, level?: string, destination?: DestinationStream): Logger {
  const options = { name, level: level ?? logLevelFromEnv(process.env, "GOV_LOG_LEVEL") ?? logLevelFromEnv(process.env, "LOG_LEVEL") ?? "info", redact: { paths: REDACTED_PATHS, censor: "***" } };
  return destination ? pino(options, destination) : pino(options);
}
