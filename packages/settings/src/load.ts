import { existsSync, readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";

/** One setting: its dotted name, how to parse it, its default, and one line for the README table. */
export interface SettingDef<T = unknown> {
  name: string;
  parse: (raw: string) => T;
  /** Used when neither the YAML file nor the environment gives a value; undefined = optional. */
  default?: T;
  doc: string;
}

export type SettingValues<D extends Record<string, SettingDef>> = {
  [K in keyof D]: D[K] extends SettingDef<infer T> ? (D[K]["default"] extends undefined ? T | undefined : T) : never;
};

export class SettingsError extends Error {
  override readonly name = "SettingsError";
}

/** `gov.security.audit-log.action` → `GOV_SECURITY_AUDIT_LOG_ACTION` (contract §8). Names without dots stay as they are (PORT, REDIS_URL). */
export function envName(name: string): string {
  return name.toUpperCase().replace(/[.-]/g, "_");
}

/** Where settings come from: the flattened YAML file (dotted names) and the environment. */
export interface SettingsSources {
  file: Record<string, string>;
  filePath?: string;
  env: Record<string, string | undefined>;
}

function flatten(value: unknown, prefix: string, out: Record<string, string>): void {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (value !== null && value !== undefined) {
    out[prefix] = Array.isArray(value) ? value.join(",") : String(value);
  }
}

/** Reads `gov.yaml` (or the file named by GOV_CONFIG) when present; nested and dotted keys both work. */
export function readSettingsSources(env: Record<string, string | undefined> = process.env, cwd = process.cwd()): SettingsSources {
  const explicit = env.GOV_CONFIG || undefined;
  const filePath = explicit ?? `${cwd}/gov.yaml`;
  const file: Record<string, string> = {};
  const exists = existsSync(filePath);
  if (exists) {
    let doc: unknown;
    try {
      doc = parseYaml(readFileSync(filePath, "utf8"));
    } catch (err) {
      throw new SettingsError(`settings file ${filePath} is not valid YAML: ${(err as Error).message}`);
    }
    flatten(doc ?? {}, "", file);
  } else if (explicit) {
    throw new SettingsError(`GOV_CONFIG names ${explicit}, which does not exist`);
  }
  return { file, filePath: exists ? filePath : undefined, env };
}

/** The setting names read from each settings file (by its flattened keys), for {@link misspelledFileKeys}. */
const asked = new WeakMap<Record<string, string>, Set<string>>();

/** Levenshtein distance of `a` and `b`, or `max + 1` once it is surely above `max`. */
function distance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    if (Math.min(...next) > max) return max + 1;
    row = next;
  }
  return row[b.length];
}

/**
 * Keys of the settings file that no setting read so far claims but that are one or two letters away from one that was
 * read (`gov.limits.zip-entrys`): a misspelling, silently doing nothing. Keys far from every name read are left alone
 * — one file may serve every kind of process, each reading its own settings.
 */
export function misspelledFileKeys(sources: SettingsSources): { key: string; meant: string }[] {
  const names = asked.get(sources.file) ?? new Set<string>();
  const out: { key: string; meant: string }[] = [];
  for (const key of Object.keys(sources.file)) {
    if (names.has(key)) continue;
    let meant: string | undefined;
    let closest = 3;
    for (const name of names) {
      const d = distance(key, name, 2);
      if (d < closest) [meant, closest] = [name, d];
    }
    if (meant !== undefined) out.push({ key, meant });
  }
  return out;
}

/**
 * The raw value of setting `name` and where it came from: its environment variable unless that is unset or empty, else
 * the YAML file; undefined when neither gives one (the default applies). Every reader of settings goes through this,
 * so an empty variable (`IDGEN_MACHINE_MACHINE_ID=`) never hides the file's value.
 */
export function rawSetting(name: string, sources: SettingsSources): { raw: string; from: string } | undefined {
  let names = asked.get(sources.file);
  if (!names) asked.set(sources.file, (names = new Set()));
  names.add(name);
  const env = envName(name);
  const fromEnv = sources.env[env];
  if (fromEnv !== undefined && fromEnv !== "") return { raw: fromEnv, from: `environment variable ${env}` };
  const fromFile = sources.file[name];
  return fromFile === undefined ? undefined : { raw: fromFile, from: sources.filePath ?? "the settings file" };
}

/**
 * Resolves each setting: environment variable first, then the YAML file, then the default.
 * A value that does not parse stops startup with a message that names the setting and its source.
 */
export function loadSettings<D extends Record<string, SettingDef>>(defs: D, sources: SettingsSources = readSettingsSources()): SettingValues<D> {
  const out: Record<string, unknown> = {};
  for (const [key, def] of Object.entries(defs)) {
    const given = rawSetting(def.name, sources);
    if (given === undefined) {
      out[key] = def.default;
      continue;
    }
    try {
      out[key] = def.parse(given.raw);
    } catch (err) {
      throw new SettingsError(`setting ${def.name} (from ${given.from}) is invalid: ${(err as Error).message}`);
    }
  }
  return out as SettingValues<D>;
}

/** The levels a log level variable takes (pino's). */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/**
 * A log level from the environment variable `name` (GOV_LOG_LEVEL, IDGEN_LOG_LEVEL), or undefined when it is unset. A
 * bad one is a SettingsError naming the variable: pino's own would be a stack trace about "custom levels".
 */
export function logLevelFromEnv(env: Record<string, string | undefined>, name: string): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === "") return undefined;
  const level = raw.trim().toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new SettingsError(`Invalid setting ${name}: "${raw.slice(0, 40)}" is not a log level; use one of ${LOG_LEVELS.join(", ")} (from environment variable ${name})`);
  }
  return level;
}
