import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { stallMonitor } from "../src/stall.js";

/**
 * Keeps this thread busy for `ms` of CPU time (not wall time: on a shared machine the other test fork may take the CPU
 * meanwhile, which is exactly what the monitor must not count).
 */
const busy = (ms: number) => {
  const cpuMs = () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  };
  const end = cpuMs() + ms;
  while (cpuMs() < end);
};

describe("stallMonitor", () => {
  it("measures work that keeps the event loop from turning", async () => {
    const stalls = stallMonitor();
    await new Promise((r) => setTimeout(r, 20));
    busy(120);
    await new Promise((r) => setTimeout(r, 20));
    expect(stalls.stop()).toBeGreaterThanOrEqual(100);
  });

  it.runIf(process.platform === "linux")("does not count time the process waited without a CPU (here: stopped by a signal for 300 ms)", async () => {
    const stalls = stallMonitor();
    const started = performance.now();
    // SIGSTOP this process for 300 ms, from outside it: the wall clock moves on, its thread runs nothing
    const pauser = spawn("sh", ["-c", `kill -STOP ${process.pid}; sleep 0.3; kill -CONT ${process.pid}`], { stdio: "ignore" });
    await new Promise((r) => pauser.once("exit", r));
    await new Promise((r) => setTimeout(r, 20));
    expect(performance.now() - started).toBeGreaterThanOrEqual(300);
    expect(stalls.stop()).toBeLessThan(50);
  });
});
