import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { admitInTurns, admitsInTurns, ADMISSION_MS_PER_TURN } from "../src/index.js";

/** A server whose request listener costs `ms` of CPU a request and records the order requests start in. */
function serverOf(ms: number) {
  const server = new EventEmitter();
  const started: number[] = [];
  server.on("request", (req: { n: number }) => {
    const until = performance.now() + ms;
    while (performance.now() < until); // a request's synchronous start: decoding, signals, a first read
    started.push(req.n);
  });
  return { server, started, send: (n: number) => server.emit("request", { n }, {}) };
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe("requests started in turns (admitInTurns)", () => {
  it("a burst of costly requests arriving in one turn starts a few milliseconds' worth at a time, in arrival order, and all of them", async () => {
    const { server, started, send } = serverOf(1);
    admitInTurns(server as never);
    expect(admitsInTurns(server)).toBe(true);
    for (let n = 0; n < 200; n++) send(n); // one read of an HTTP/2 connection delivers its streams like this
    const inFirstTurn = started.length;
    // at least the untimed 16; then no more than the turn's budget (≥ 1 ms each) and the one that crossed it
    expect(inFirstTurn).toBeGreaterThanOrEqual(16);
    expect(inFirstTurn).toBeLessThanOrEqual(16 + ADMISSION_MS_PER_TURN + 1);
    // other work of the process runs between the batches: a turn ends before the burst has started
    await nextTurn();
    expect(started.length).toBeLessThan(200);
    while (started.length < 200) await nextTurn();
    expect(started).toEqual([...Array(200).keys()]);
  });

  it("cheap requests start at once, and a request that arrives while others wait queues behind them", async () => {
    const cheap = serverOf(0);
    admitInTurns(cheap.server as never);
    const began = performance.now();
    for (let n = 0; n < 1000; n++) cheap.send(n);
    // within the turn's budget nothing waits (a turn of 1,000 cheap requests takes ~1 ms; one the scheduler stalled
    // past the budget proves nothing either way)
    if (performance.now() - began < ADMISSION_MS_PER_TURN) expect(cheap.started.length).toBe(1000);
    else expect(cheap.started.length).toBeGreaterThanOrEqual(16);

    const costly = serverOf(1);
    admitInTurns(costly.server as never);
    for (let n = 0; n < 100; n++) costly.send(n);
    await nextTurn(); // a new turn, with requests still waiting: the newcomer does not overtake them
    costly.send(100);
    while (costly.started.length < 101) await nextTurn();
    expect(costly.started).toEqual([...Array(101).keys()]);
  });
});
