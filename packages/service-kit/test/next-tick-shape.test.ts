// settleNextTickShape (next-tick-shape.ts): what V8 needs to settle on the fast form of Node's tick objects — thousands
// of ticks queued with arguments — without what made it worse — ticks left queued while startup goes on (V8 then
// allocated every later tick object in the old generation).
import { createHook } from "node:async_hooks";
import { describe, expect, it } from "vitest";
import { settleNextTickShape } from "../src/index.js";

describe("settleNextTickShape", () => {
  it("queues thousands of ticks with arguments, a few hundred at a time, and resolves once every one has run", async () => {
    const queued = new Set<number>();
    let withArguments = 0;
    let mostPending = 0;
    const hook = createHook({
      init(asyncId, type, _trigger, resource) {
        if (type !== "TickObject") return;
        queued.add(asyncId);
        mostPending = Math.max(mostPending, queued.size);
        if (Array.isArray((resource as { args?: unknown }).args)) withArguments++;
      },
      before(asyncId) {
        queued.delete(asyncId);
      },
    });
    hook.enable();
    try {
      await settleNextTickShape();
    } finally {
      hook.disable();
    }
    expect(withArguments).toBeGreaterThanOrEqual(5000);
    expect(mostPending).toBeLessThanOrEqual(600);
    expect(queued.size).toBe(0);
  });
});
