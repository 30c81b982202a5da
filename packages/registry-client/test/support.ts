import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { Transport } from "@connectrpc/connect";
import type { RegistryEvent } from "../src/index.js";

/** What a counting wrapper saw: every call by method name, and the X-Gov-Consumer header each carried. */
export interface CallLog {
  calls: { method: string; consumer: string | null }[];
  count(method: string): number;
  /** The most unary calls that were in flight at once. */
  maxInFlight: number;
}

/** Wraps the real transport and records each call before passing it on unchanged (it counts; it does not fake). */
export function countingTransport(inner: Transport): { transport: Transport; log: CallLog } {
  const calls: CallLog["calls"] = [];
  const record = (method: string, header: HeadersInit | undefined) => calls.push({ method, consumer: new Headers(header).get("x-gov-consumer") });
  let inFlight = 0;
  const log: CallLog = { calls, count: (m) => calls.filter((c) => c.method === m).length, maxInFlight: 0 };
  return {
    transport: {
      unary: async (method, signal, timeoutMs, header, input, ctx) => {
        record(method.name, header);
        log.maxInFlight = Math.max(log.maxInFlight, ++inFlight);
        try {
          return await inner.unary(method, signal, timeoutMs, header, input, ctx);
        } finally {
          inFlight--;
        }
      },
      stream: (method, signal, timeoutMs, header, input, ctx) => (record(method.name, header), inner.stream(method, signal, timeoutMs, header, input, ctx)),
    },
    log,
  };
}

/**
 * Starts `fixtures/register-child.ts` (a service process registering itself through the SDK) with `env`, and waits for
 * the instance id it prints once registered.
 */
export async function spawnRegisteredChild(env: Record<string, string>): Promise<{ child: ChildProcess; instanceId: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(new URL("./fixtures/register-child.ts", import.meta.url))], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once("line", resolve);
      child.once("exit", (code) => reject(new Error(`the child exited (${code}) before registering`)));
    });
    return { child, instanceId: line.replace(/^registered /, "") };
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  }
}

/** The instance ids of each `instances` event a client reported, in order: the states its cache went through. */
export const cachedStates = (events: RegistryEvent[]): string[][] =>
  events.flatMap((e) => (e.type === "instances" ? [e.instances.map((i) => i.instanceId)] : []));

/**
 * Whether a cache held `instanceId` alone in every state but the last, and nothing in the last: it learnt the expiry
 * from the stream (the states before it are the first one and the instance's renewals, sent when a ttl it held passed).
 */
export const heldUntilExpired = (events: RegistryEvent[], instanceId: string): boolean => {
  const states = cachedStates(events);
  return states.length >= 2 && states.at(-1)!.length === 0 && states.slice(0, -1).every((ids) => ids.length === 1 && ids[0] === instanceId);
};
