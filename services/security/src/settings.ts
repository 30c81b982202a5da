import { parseBoolean, parseDurationBetween, parseEnum, parseInteger, type SettingDef } from "@gov/settings";
import { endpointSettings, sharedSettings } from "@gov/service-kit";
import { namespaceSettings } from "@gov/namespaces";
import { MAX_PASSWORD_BYTES } from "./passwords.js";

/** Ports of the security service's own process. */
export const SECURITY_PORTS = { port: 8095, grpcPort: 9095 };

export type AuditSelection = "write" | "read" | "rw";

/** The super user's name: a name the login path takes (not empty, at most 128 characters, no control characters). */
function parseSuperUsername(raw: string): string {
  const name = raw.trim();
  if (name === "") throw new Error("must not be empty: give the super user a name, or remove the setting for the default (root)");
  if (name.length > 128 || /[\u0000-\u001f\u007f]/.test(name)) throw new Error("must be at most 128 characters without control characters");
  return name;
}

/** The super user's password as given: one a login can send (not empty, at most 1024 bytes). */
function parseSuperPassword(raw: string): string {
  if (raw === "") throw new Error("must not be empty: remove the setting to have a password generated and printed once");
  if (Buffer.byteLength(raw) > MAX_PASSWORD_BYTES) throw new Error(`must be at most ${MAX_PASSWORD_BYTES} bytes`);
  return raw;
}

function parseSecret(raw: string): string {
  if (raw.length < 32) throw new Error("must be at least 32 characters (HS256 needs a 256-bit key): generate one with `openssl rand -base64 48`");
  return raw;
}


/** What the security service and the authorization interceptor read (contract §7). Documented in the root README. */
export const securityModuleSettings = {
  ...sharedSettings,
  enabled: {
    name: "gov.security.enabled",
    parse: parseBoolean,
    default: true,
    doc: "`false` opens every endpoint to everyone and audits nothing (said loudly at startup)",
  } as SettingDef<boolean>,
  // the same setting as the namespace index's: users, roles, the audit log and the JWT key live beside it
  systemNamespace: namespaceSettings.systemNamespace,
  superUsername: { name: "gov.super.username", parse: parseSuperUsername, default: "root", doc: "name of the super user (cannot be locked or deleted; bypasses RBAC)" } as SettingDef<string>,
  superPassword: {
    name: "gov.super.password",
    parse: parseSuperPassword,
    doc: "password of the super user (also `GOV_SUPER_PASSWORD`); unset = generated on first start and printed once",
  } as SettingDef<string>,
  superInit: { name: "gov.super.init", parse: parseBoolean, default: false, doc: "drives `gov.security.enforce-init-super-user`" } as SettingDef<boolean>,
  enforceInitSuperUser: {
    name: "gov.security.enforce-init-super-user",
    parse: parseBoolean,
    doc: "`true` resets the super user at startup (password from `gov.super.password`, else a new one printed once; unlocked); default `gov.super.init`",
  } as SettingDef<boolean>,
  jwtAlgorithm: { name: "sec.jwt.algorithm", parse: parseEnum("hmac256"), default: "hmac256", doc: "JWT signing algorithm: `hmac256` (HS256), the only one" } as SettingDef<"hmac256">,
  jwtSecret: {
    name: "sec.jwt.secret",
    parse: parseSecret,
    doc: "JWT signing secret (≥ 32 characters); else `gov.security.key`; else one generated once and kept in the system namespace",
  } as SettingDef<string>,
  securityKey: { name: "gov.security.key", parse: parseSecret, doc: "JWT signing secret when `sec.jwt.secret` is unset" } as SettingDef<string>,
  accessValidity: { name: "sec.jwt.token-validity.access", parse: parseDurationBetween(1000), default: 15 * 60_000, doc: "access token lifetime" } as SettingDef<number>,
  refreshValidity: { name: "sec.jwt.token-validity.refresh", parse: parseDurationBetween(1000), default: 3 * 3_600_000, doc: "refresh token lifetime" } as SettingDef<number>,
  maxFailures: {
    name: "gov.security.login.max-failures",
    parse: parseInteger(1, 1000),
    default: 10,
    doc: "failed logins in a row that lock an account for `gov.security.login.lock-duration`",
  } as SettingDef<number>,
  // 0 would switch the lockout off without a word (every guess allowed, the account never locked)
  lockDuration: { name: "gov.security.login.lock-duration", parse: parseDurationBetween(1000), default: 15 * 60_000, doc: "how long failed logins lock an account (at least 1s)" } as SettingDef<number>,
  auditAction: {
    name: "gov.security.audit-log.action",
    parse: parseEnum<AuditSelection>("write", "read", "rw"),
    default: "write",
    doc: "which calls the audit log records: `write`, `read` or `rw` (refused calls included)",
  } as SettingDef<AuditSelection>,
  auditMaxEntries: {
    name: "gov.security.audit-log.max-entries",
    parse: parseInteger(1, 10_000_000),
    default: 100_000,
    doc: "audit entries kept; the oldest are dropped first",
  } as SettingDef<number>,
};

/** Every setting of the security service, with the endpoint settings the process runner derives from its name. */
export const securitySettings = { ...securityModuleSettings, ...endpointSettings("security", SECURITY_PORTS) };
