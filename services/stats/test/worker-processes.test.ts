import { spawn, type ChildProcess } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { redisTargets } from "@gov/testkit";
import { afterAll, describe, expect, it, vi } from "vitest";

// Three stats workers (`npm run start:worker`) as separate processes on one Redis Cluster, with the real schedule
// (first pass 1 s after start, then every 10 s). About 43 s: 28 s of watching (three periods, each allowed to start a
// little late), then a takeover after a SIGKILL. (The distributed suite also kills the holder, under load.)
const WORKER_MAIN = join(dirname(fileURLToPath(import.meta.url)), "../src/worker/main.ts");
const cluster = redisTargets().find((t) => t.name === "redis-cluster")!;

interface Pass {
  pid: number;
  start: number;
  end: number;
}

describe.skipIf(cluster.skip)("stats workers on a Redis Cluster", () => {
  const children: ChildProcess[] = [];
  const passes: Pass[] = [];
  afterAll(() => {
    for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  });

  /** Starts a worker; resolves once it listens. Its "statistics pass done" lines are collected in `passes`. */
  const startWorker = (system: string) =>
    new Promise<ChildProcess>((resolve, reject) => {
      const child = spawn(process.execPath, ["--import", "tsx", WORKER_MAIN], {
        env: { ...process.env, REDIS_URL: cluster.url, GOV_NAMESPACE_SYSTEM: system, GOV_WORKER_SERVICE_PORT: "0", MANAGEMENT_SERVER_PORT: "0", GOV_LOG_LEVEL: "info" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      children.push(child);
      child.stderr!.resume();
      child.once("exit", (code, signal) => reject(new Error(`worker exited (${code ?? signal}) before listening`)));
      createInterface({ input: child.stdout! }).on("line", (line) => {
        let entry: { msg?: string; pid?: number; time?: number; passStartedAt?: string };
        try {
          entry = JSON.parse(line) as typeof entry;
        } catch {
          return;
        }
        if (entry.msg === "listening") resolve(child);
        if (entry.msg === "statistics pass done") passes.push({ pid: child.pid!, start: Date.parse(entry.passStartedAt!), end: entry.time! });
      });
    });

  it("each 10 s period is run by exactly one worker, without overlap; after a SIGKILL of the holder another works within 20 s", { timeout: 120_000 }, async () => {
    // a system namespace of our own: the `stat` mutex and the pass pacing are not shared with other tests
    const system = `gov-{sys${process.pid}x${Date.now().toString(36)}}`;
    await Promise.all([startWorker(system), startWorker(system), startWorker(system)]);
    await vi.waitFor(() => expect(passes.length).toBeGreaterThan(0), { timeout: 15_000, interval: 100 });
    const watchFrom = passes[0].start;
    await vi.waitFor(() => expect(Date.now() - watchFrom).toBeGreaterThan(28_000), { timeout: 35_000, interval: 200 });

    const seen = [...passes].sort((a, b) => a.start - b.start);
    expect(seen.length).toBeGreaterThanOrEqual(3); // at 0, 10 and 20 s
    for (let i = 1; i < seen.length; i++) {
      expect(seen[i].start, "a pass started before the previous one ended").toBeGreaterThanOrEqual(seen[i - 1].end);
      const gap = seen[i].start - seen[i - 1].start;
      expect(gap, "two passes in one period").toBeGreaterThanOrEqual(9_900);
      expect(gap, "a period without a pass").toBeLessThan(13_000); // due every 10 s; a pass more than a tick late starts from now
    }

    const holder = seen.at(-1)!.pid;
    const killedAt = Date.now();
    children.find((c) => c.pid === holder)!.kill("SIGKILL");
    await vi.waitFor(() => expect(passes.some((p) => p.pid !== holder && p.start > killedAt)).toBe(true), { timeout: 25_000, interval: 100 });
    const takeover = passes.find((p) => p.pid !== holder && p.start > killedAt)!;
    expect(takeover.start - killedAt).toBeLessThanOrEqual(20_000);
    // paced from the dead holder's last pass: still one pass per period
    expect(takeover.start - seen.at(-1)!.start).toBeGreaterThanOrEqual(9_900);
  });
});
