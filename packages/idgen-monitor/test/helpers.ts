import { execFileSync } from "node:child_process";
import { Writable } from "node:stream";
import { createLogger, type Logger } from "@gov/service-kit";
import type { SettingsSources } from "@gov/settings";

/** A process logger whose JSON lines are kept (the pino log an operator would read). */
export function capturedLogger(): { logger: Logger; lines: Record<string, unknown>[]; find(msg: string): Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split("\n")) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  });
  const logger = createLogger("test", "info", sink);
  return { logger, lines, find: (msg) => lines.filter((l) => l.msg === msg) };
}

/** Settings as the environment would give them (no gov.yaml, nothing from the real environment). */
export const sources = (env: Record<string, string> = {}): SettingsSources => ({ file: {}, env: { GOV_SHUTDOWN_GRACE: "1s", ...env } });

export const TOKEN = "test-management-token-0123456789";
export const USER_TOKEN = "a-user-access-token";

/** Polls `check` every 25 ms until it holds; throws naming `what` after `timeoutMs`. */
export async function waitUntil(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** `promtool` on the PATH (Debian's `prometheus` package), else undefined: the check is skipped. */
export function promtool(): string | undefined {
  try {
    execFileSync("promtool", ["--version"], { stdio: "ignore" });
    return "promtool";
  } catch {
    return undefined;
  }
}

/** A Prometheus sample value: `name{labels} value`, with label order as written. */
export function sample(text: string, name: string, labels = ""): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const [series, value] = [line.slice(0, line.lastIndexOf(" ")), line.slice(line.lastIndexOf(" ") + 1)];
    if (series === name + labels || (labels === "" && series.startsWith(`${name}{`))) return Number(value);
  }
  return undefined;
}
