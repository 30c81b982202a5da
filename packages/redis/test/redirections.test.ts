import { describe, expect, it } from "vitest";
import { describeWriteFailure, isConnectionError, StoreUnavailableError, WriteOutcomeUnknownError } from "../src/index.js";

// ioredis' own wording when it stops following a Cluster's redirections (seen during a master's failover, while the
// slot map moves): an outage (503), not a bug (500). Whether a write may have run depends on the last answer.
const gaveUp = (last: string) => new Error(`Too many Cluster redirections. Last error: ${last}`);
const write = { what: "the write of config \"a\"", howToCheck: "read it back" };

describe("a Cluster that keeps redirecting (failover in progress)", () => {
  it("is an outage", () => {
    expect(isConnectionError(gaveUp("ReplyError: MOVED 8815 127.0.0.1:26401"))).toBe(true);
    expect(isConnectionError(gaveUp("ReplyError: CLUSTERDOWN The cluster is down"))).toBe(true);
  });

  it("wrote nothing when the last answer refused the command (MOVED, CLUSTERDOWN), and may have written otherwise", () => {
    const refused = describeWriteFailure(new StoreUnavailableError("Redis is unavailable: retry when it is back", { cause: gaveUp("ReplyError: MOVED 8815 127.0.0.1:26401") }), true, write);
    expect([refused instanceof WriteOutcomeUnknownError, (refused as Error).message]).toEqual([false, "Redis is unavailable: nothing was written; retry when it is back"]);
    const lost = describeWriteFailure(new StoreUnavailableError("Redis is unavailable: retry when it is back", { cause: gaveUp("Error: Connection is closed.") }), true, write);
    expect(lost).toBeInstanceOf(WriteOutcomeUnknownError);
  });
});
