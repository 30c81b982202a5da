import { connect } from "node:net";
import { expect } from "vitest";
import { stallMonitor } from "./stall.js";

/** A raw HTTP/1.1 request whose socket only counts the bytes that arrive: reading costs the test next to nothing. */
export interface ByteCounter {
  received(): number;
  close(): void;
}

/** Sends `method path` with `headers` (lines such as "Accept: text/event-stream") and `body` to `origin`. */
export function countingRequest(origin: URL, method: string, path: string, headers: string[] = [], body: Uint8Array = new Uint8Array()): ByteCounter {
  const socket = connect(Number(origin.port), origin.hostname);
  let bytes = 0;
  socket.on("data", (chunk: Buffer) => (bytes += chunk.length));
  socket.on("error", () => {}); // closed by the test, or the server went first: only the counts matter
  const head = [`${method} ${path} HTTP/1.1`, `Host: ${origin.host}`, ...headers, ...(body.length ? [`Content-Length: ${body.length}`] : [])];
  socket.write(Buffer.concat([Buffer.from(`${head.join("\r\n")}\r\n\r\n`), body]));
  return { received: () => bytes, close: () => socket.destroy() };
}

/**
 * Measures one fan-out to `watchers`: waits until each has received at least `firstBytes` (its watch's first message)
 * and nothing more arrives, then runs `trigger` and waits until each has received `bytesEach` more. Returns the
 * longest event-loop stall meanwhile (this thread's own CPU time between turns, see stallMonitor) and the process's
 * CPU time for the whole fan-out (the server's, when it runs in this process, and the counting's).
 */
export async function measureFanOut(watchers: ByteCounter[], firstBytes: number, trigger: () => Promise<void>, bytesEach: number): Promise<{ stallMs: number; cpuMs: number }> {
  const counts = () => watchers.map((w) => w.received());
  await expect.poll(() => counts().every((b) => b >= firstBytes), { timeout: 30_000, interval: 50 }).toBe(true);
  let settled = counts();
  await expect.poll(() => ((settled = counts()), settled), { timeout: 5_000, interval: 100 }).toEqual(settled);

  const stalls = stallMonitor();
  const cpuBefore = process.cpuUsage();
  await trigger();
  await expect.poll(() => watchers.filter((w, i) => w.received() - settled[i] >= bytesEach).length, { timeout: 30_000, interval: 20 }).toBe(watchers.length);
  const stallMs = stalls.stop();
  const cpu = process.cpuUsage(cpuBefore);
  return { stallMs, cpuMs: (cpu.user + cpu.system) / 1000 };
}
