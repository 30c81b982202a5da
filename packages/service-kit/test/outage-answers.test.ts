// An outage's answers in the log: the first whole, the rest counted, a summary while it lasts and when it ends.
import { describe, expect, it } from "vitest";
import { createLogger, outageAnswers } from "../src/index.js";

describe("outage answers in the log", () => {
  it("logs the first answer of each kind, counts the rest, sums up every summary period and when they stop", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger("test", "info", { write: (line: string) => void lines.push(JSON.parse(line)) });
    let t = 0;
    const log = outageAnswers(logger, { now: () => t, quietMs: 200, summaryMs: 400 });
    for (let i = 0; i < 5; i++) log.report("unavailable", { path: "/a" }, `Redis is unavailable (${i})`);
    log.report("deadline_exceeded", {}, "the write may or may not have been applied");
    expect(lines.map((l) => [l.level, l.code, l.msg])).toEqual([
      [40, "unavailable", "Redis is unavailable (0)"],
      [40, "deadline_exceeded", "the write may or may not have been applied"],
    ]);
    // still failing past a summary period: one line with the count since the first
    t = 450;
    log.report("unavailable", {}, "Redis is unavailable (5)");
    await expect.poll(() => lines.length, { timeout: 2000, interval: 20 }).toBeGreaterThan(2);
    expect(lines[2]).toMatchObject({ level: 40, code: "unavailable", answers: 5, total: 6 }); // deadline_exceeded: quiet since 0, ended
    // quiet: both end, with their totals
    t = 1000;
    await expect.poll(() => lines.filter((l) => l.level === 30).map((l) => [l.code, l.answers]), { timeout: 2000, interval: 20 }).toEqual(
      expect.arrayContaining([
        ["unavailable", 6],
        ["deadline_exceeded", 1],
      ]),
    );
    // a later outage starts a new episode
    log.report("unavailable", {}, "Redis is unavailable again");
    expect(lines.at(-1)).toMatchObject({ level: 40, msg: "Redis is unavailable again" });
    log.flush();
  });
});
