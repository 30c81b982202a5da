/**
 * deploy/split-processes.sh stops what it started by the PIDs it kept (`kill "${pids[@]}"` on exit, Ctrl-C or SIGTERM).
 * Those must be the servers' own PIDs: `npm run start:<kind>` runs the server as a grandchild (npm → sh → node), and a
 * SIGTERM to npm leaves that server running, so each process is started directly. And a signal must end the script:
 * a trap that only cleaned up let it go on and start the processes still to come.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const script = readFileSync(join(dirname(fileURLToPath(import.meta.url)), "../split-processes.sh"), "utf8");

/** Each command the script starts in the background and keeps the PID of, without its leading VAR=value words. */
function keptCommands(): string[] {
  return script
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .filter((line) => /&\s*pids\+=\(\$!\)/.test(line))
    .map((line) => line.replace(/&\s*pids\+=.*$/, "").trim().replace(/^(\w+=(\$\(\([^)]*\)\)|\S*)\s+)+/, ""));
}

describe("deploy/split-processes.sh", () => {
  it("keeps the PIDs of the servers themselves, not of an npm that runs them", () => {
    const commands = keptCommands();
    expect(commands.length).toBeGreaterThanOrEqual(6); // redis-server, four services, the gateways' loop line
    for (const command of commands) expect(command, command).toMatch(/^(node scripts\/start\.mjs (config|registry|stats|security|gateway)|redis-server)\b/);
  });

  it("ends on SIGINT and SIGTERM, stopping what it started, rather than going on to start the rest", () => {
    // A signal that arrives while a foreground step runs (the build, a sleep) is handled when that step ends.
    expect(script).toMatch(/^trap cleanup EXIT$/m);
    expect(script).toMatch(/^trap '[^']*\bexit\b[^']*' INT$/m);
    expect(script).toMatch(/^trap '[^']*\bexit\b[^']*' TERM$/m);
  });
});
