import { describe, expect, it } from "vitest";
import { fanOutPacer } from "../src/index.js";

/** Counts the turns of the event loop (check phases) until `promise` settles. */
async function turnsUntil(promise: Promise<void>): Promise<number> {
  let turns = 0;
  let done = false;
  void promise.then(() => (done = true));
  while (!done) {
    await new Promise((resolve) => setImmediate(resolve));
    turns++;
  }
  return turns;
}

describe("fanOutPacer", () => {
  it("lets a turn's budget through at once, and the rest in later turns, first come first served", async () => {
    const pace = fanOutPacer(10);
    expect(pace(6)).toBeUndefined();
    expect(pace(4)).toBeUndefined(); // exactly the budget
    const order: number[] = [];
    const waits = [1, 2, 3].map((n) => pace(6)!.then(() => order.push(n)));
    expect(waits.every((w) => w instanceof Promise)).toBe(true);
    await Promise.all(waits);
    expect(order).toEqual([1, 2, 3]);
    // A message larger than the whole budget still goes, alone in its turn.
    expect(pace(100)).toBeDefined();
  });

  it("spreads 20 messages of a turn's budget over 20 turns, and starts every turn afresh", async () => {
    const pace = fanOutPacer(10);
    const waits = Array.from({ length: 20 }, () => pace(10) ?? Promise.resolve());
    const last = await turnsUntil(Promise.all(waits).then(() => {}));
    expect(last).toBeGreaterThanOrEqual(19);
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(pace(10)).toBeUndefined(); // a new turn, a new budget
  });
});
