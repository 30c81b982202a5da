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
 * Query parameters whose value is a credential, by name (any case, any spelling of the word): the proto's secrets
 * (`password`, `oldPassword`, `new_password`, `accessToken`, `refresh_token`) and the usual ones clients put in URLs
 * (`access_token`, `token`, `api_key`, `secret`, `auth`).
 */
const SECRET_QUERY_NAME = /pass|pwd|token|secret|auth|api[-_]?key/i;

/**
 * `url` (a request target) as a log line may hold it: the value of every query parameter that names a credential is
 * `***`. The REST gateway refuses such parameters ("not taken from the query string (URLs are kept in logs …)"), but
 * the access log writes the target before anyone looked at it: `PATCH /v1/users/u/password?newPassword=…` was refused
 * and its password written to the log all the same.
 */
export function urlForLog(url: string | undefined): string | undefined {
  const q = url?.indexOf("?") ?? -1;
  if (q < 0) return url; // the common case: no query string, nothing to look at
  const parts = url!.slice(q + 1).split("&");
  let changed = false;
  for (let i = 0; i < parts.length; i++) {
    const eq = parts[i].indexOf("=");
    if (eq < 0) continue;
    let name = parts[i].slice(0, eq);
    try {
      name = decodeURIComponent(name.replaceAll("+", " "));
    } catch {
      // a malformed escape: the name as sent
    }
    if (SECRET_QUERY_NAME.test(name)) {
      parts[i] = `${parts[i].slice(0, eq)}=***`;
      changed = true;
    }
  }
  return changed ? `${url!.slice(0, q)}?${parts.join("&")}` : url;
}

/**
 * pino JSON lines on stdout (or `destination`), with levels; GOV_LOG_LEVEL (or LOG_LEVEL) sets the level, default info.
 */
export function createLogger(name: string, level?: string, destination?: DestinationStream): Logger {
  const options = { name, level: level ?? logLevelFromEnv(process.env, "GOV_LOG_LEVEL") ?? logLevelFromEnv(process.env, "LOG_LEVEL") ?? "info", redact: { paths: REDACTED_PATHS, censor: "***" } };
  return destination ? pino(options, destination) : pino(options);
}
