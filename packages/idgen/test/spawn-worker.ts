import { spawn, type ChildProcess } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const fixtures = join(dirname(fileURLToPath(import.meta.url)), "fixtures");

export interface Worker {
  child: ChildProcess;
  lines: string[];
  /** Resolves with the first stdout line starting with `prefix`. */
  waitFor(prefix: string, timeoutMs?: number): Promise<string>;
  exited: Promise<number | null>;
}

/** Runs `fixtures/<script>` with tsx in its own process (stdin is a pipe, for a "go" line to start workers together). */
export function spawnWorker(script: string, args: string[]): Worker {
  const child = spawn(process.execPath, ["--import", "tsx", join(fixtures, script), ...args], { stdio: ["pipe", "pipe", "pipe"] });
  const lines: string[] = [];
  let buf = "";
  const waiters: { prefix: string; resolve: (l: string) => void }[] = [];
  child.stdout!.on("data", (chunk: Buffer) => {
    buf += chunk.toString("utf8");
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      lines.push(line);
      for (const w of [...waiters]) if (line.startsWith(w.prefix)) (waiters.splice(waiters.indexOf(w), 1), w.resolve(line));
    }
  });
  let stderr = "";
  child.stderr!.on("data", (c: Buffer) => void (stderr += c.toString("utf8")));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return {
    child,
    lines,
    exited,
    waitFor(prefix, timeoutMs = 30_000) {
      const seen = lines.find((l) => l.startsWith(prefix));
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`worker ${script} did not print ${prefix} in ${timeoutMs} ms; stderr: ${stderr.slice(-2000)}`)), timeoutMs);
        void exited.then((code) => {
          if (!lines.some((l) => l.startsWith(prefix))) {
            clearTimeout(t);
            reject(new Error(`worker ${script} exited (${code}) before printing ${prefix}; stderr: ${stderr.slice(-2000)}`));
          }
        });
        waiters.push({ prefix, resolve: (l) => (clearTimeout(t), resolve(l)) });
      });
    },
  };
}

/** SIGKILL by PID and wait for the exit. */
export async function killWorker(w: Worker): Promise<void> {
  if (w.child.pid && w.child.exitCode === null) process.kill(w.child.pid, "SIGKILL");
  await w.exited;
}
