import { getEventListeners } from "node:events";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { nextUnlessAborted, untilAborted } from "../src/abortable.js";

// A forced full GC, without starting the test process with --expose-gc.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** Waits (GC, then a macrotask for finalizers) until `done()`, or fails after `ms`. */
async function collectUntil(done: () => boolean, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!done()) {
    if (Date.now() > until) throw new Error("not collected in time");
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A stream that yields `count` large messages (each registered with `registry`), then waits until `release` resolves. */
async function* largeMessages(count: number, registry: FinalizationRegistry<number>, release: Promise<void>) {
  for (let i = 0; i < count; i++) {
    const message = { seq: i, data: new Uint8Array(256 * 1024) };
    registry.register(message, i);
    yield message;
  }
  await release; // an open watch: no more changes for now, but not ended
}

describe("untilAborted (streams ending at shutdown)", () => {
  it("keeps nothing of what it delivered while the stream stays open", async () => {
    let collected = 0;
    const registry = new FinalizationRegistry<number>(() => collected++);
    let release!: () => void;
    const shutdown = new AbortController();
    const it = untilAborted(largeMessages(40, registry, new Promise<void>((r) => (release = r))), shutdown.signal, () => new Error("shutting down"))[Symbol.asyncIterator]();
    for (let i = 0; i < 40; i++) expect((await it.next()).value).toMatchObject({ seq: i });
    const waiting = it.next(); // the stream is open, waiting for its next message
    // Every message but the last one the generator still holds can go: 39 of 40 (the old race against one
    // stream-long promise kept all of them, 10 MiB here, 90 MiB for 90 updates of 1 MiB).
    await collectUntil(() => collected >= 39);
    release();
    expect((await waiting).done).toBe(true);
  });

  it("ends a waiting stream with the reason when the signal aborts and leaves no listener", async () => {
    const shutdown = new AbortController();
    async function* forever() {
      yield 1;
      await new Promise(() => {});
    }
    const it = untilAborted(forever(), shutdown.signal, () => new Error("shutting down"))[Symbol.asyncIterator]();
    expect((await it.next()).value).toBe(1);
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(0); // between messages, nothing listens
    const waiting = it.next();
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(1);
    shutdown.abort();
    await expect(waiting).rejects.toThrow("shutting down");
    expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(0);
  });

  it("nextUnlessAborted: one listener per step, removed when the step settles", async () => {
    const signal = new AbortController().signal;
    const source = (async function* () {
      for (let i = 0; i < 100; i++) yield i;
    })();
    for (let i = 0; i < 100; i++) expect((await nextUnlessAborted(source, signal, () => new Error("x"))).value).toBe(i);
    expect(getEventListeners(signal, "abort")).toHaveLength(0);
  });
});
