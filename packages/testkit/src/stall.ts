import { existsSync, readFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";

/** How often the monitor's timer asks for a turn of the event loop. */
const TICK_MS = 5;

/**
 * The main thread's time on a CPU in ms, from the scheduler's own account (Linux: the first field of
 * `/proc/self/task/<pid>/schedstat`, in ns); undefined where there is no such file.
 */
function onCpuClock(): (() => number) | undefined {
  const path = `/proc/self/task/${process.pid}/schedstat`;
  if (!existsSync(path)) return undefined;
  return () => Number(readFileSync(path, "utf8").split(" ", 1)[0]) / 1e6;
}

/**
 * Measures the longest time this process's event loop was kept from turning by work on its own thread — the stall the
 * contract bounds (~50 ms: no request may block the event loop longer) — between `stallMonitor()` and `stop()`.
 *
 * A timer asks for a turn every few ms, and each gap between two turns is charged only the time the main thread spent
 * on a CPU in it (the scheduler's count): time the process waited for a CPU while another process had it — the other
 * test fork on CI's 2 cores, a helper's build — is not a stall of ours. A wall-clock delay histogram counts that too,
 * and failed a ZIP import test at 150–190 ms on a loaded machine where its own work took far less. Without the
 * scheduler's count (not Linux), it falls back to that histogram.
 */
export function stallMonitor(): { stop(): number } {
  const onCpu = onCpuClock();
  if (onCpu === undefined) {
    const histogram = monitorEventLoopDelay({ resolution: TICK_MS });
    histogram.enable();
    return {
      stop() {
        histogram.disable();
        return Math.max(0, histogram.max / 1e6 - TICK_MS);
      },
    };
  }
  let last = onCpu();
  let longest = 0;
  const turn = () => {
    const now = onCpu();
    longest = Math.max(longest, now - last);
    last = now;
  };
  const timer = setInterval(turn, TICK_MS);
  return {
    stop() {
      clearInterval(timer);
      turn(); // the stretch since the last turn counts too
      return longest;
    },
  };
}
