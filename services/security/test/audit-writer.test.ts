import { connectRedis, StoreUnavailableError } from "@gov/redis";
import { createLogger } from "@gov/service-kit";
import { redisServerPath, startRedis } from "@gov/testkit";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { createAuditWriter, NO_OUTCOME } from "../src/audit-log.js";
import { createMemorySecurityStore } from "../src/store/memory-security-store.js";
import { createRedisSecurityStore } from "../src/store/redis-security-store.js";
import { collectAudit, type SecurityStore } from "../src/store/security-store.js";
import { systemNs } from "./harness.js";

const entry = (i: number) => ({ id: `e${i}`, operator: "op", ip: "", resource: `/r/${i}`, action: "PUT", status: 200, msg: "", opTime: i });

/**
 * The embedded store standing in for Redis (`kind`: a store that outlives this process, so entries are opened), with its
 * audit writes counted (`calls`: outcome writes, close or append) and, while `down`, refused as Redis would refuse them;
 * `loseOpens` acknowledges opens without storing them (a failover that lost them), `failAppends` refuses that many appends,
 * `applyThenFail` applies that many closes or appends and then fails them (an unknown outcome: the reply was lost).
 */
function observedStore(kind: SecurityStore["kind"] = "redis") {
  const store = createMemorySecurityStore();
  const state = { calls: 0, down: false, opens: 0, loseOpens: false, failAppends: 0, applyThenFail: 0 };
  const unavailable = () => new StoreUnavailableError("Redis at 127.0.0.1:1 is unavailable (test)");
  const observed: SecurityStore = {
    ...store,
    kind,
    async openAudit(entries) {
      state.opens++;
      if (state.down) throw unavailable();
      if (!state.loseOpens) await store.openAudit(entries);
    },
    async closeAudit(outcomes, max) {
      state.calls++;
      if (state.down) throw unavailable();
      const missing = await store.closeAudit(outcomes, max);
      if (state.applyThenFail-- > 0) throw unavailable(); // applied, and the reply lost
      return missing;
    },
    async appendAudit(entries, max, skipLoggedAmong) {
      state.calls++;
      if (state.down || state.failAppends-- > 0) throw unavailable();
      await store.appendAudit(entries, max, skipLoggedAmong);
      if (state.applyThenFail-- > 0) throw unavailable();
    },
  };
  return { store: observed, state };
}

const opening = (i: number) => ({ ...entry(i), status: 0, msg: NO_OUTCOME }); // as the audit interceptor opens it
const ALL = Number.MAX_SAFE_INTEGER;

describe("the audit writer", () => {
  it("writes the entries of concurrent calls in one store call, without making them wait", async () => {
    const { store, state } = observedStore();
    const writer = createAuditWriter(store, 1000, createLogger("test", "silent"));
    await Promise.all(Array.from({ length: 100 }, (_, i) => writer.open(opening(i))));
    for (let i = 0; i < 100; i++) expect(writer.record(entry(i))).toBeUndefined(); // nothing to await: off the request path
    await writer.flushed();
    expect(state.calls).toBe(1);
    expect((await collectAudit(store.scanAudit(Number.MAX_SAFE_INTEGER))).map((e) => e.id)).toEqual(Array.from({ length: 100 }, (_, i) => `e${99 - i}`));
  });

  it("keeps what the store refused and writes it once the store is back; close() writes what is left", async () => {
    const { store, state } = observedStore();
    const lines: Record<string, unknown>[] = [];
    const writer = createAuditWriter(store, 1000, createLogger("test", "info", { write: (line: string) => void lines.push(JSON.parse(line)) }));
    state.down = true;
    writer.record(entry(1));
    writer.record(entry(2));
    await expect.poll(() => state.calls, { timeout: 3000 }).toBeGreaterThanOrEqual(2); // retried
    // an outage is expected: said once, at warn, with the store's message and without a stack
    const refused = lines.filter((l) => (l.level as number) >= 40);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ level: 40, msg: expect.stringMatching(/store refused entries/), error: { type: "StoreUnavailableError", message: expect.stringMatching(/unavailable/) } });
    expect(JSON.stringify(refused[0])).not.toContain("stack");
    expect(await collectAudit(store.scanAudit(Number.MAX_SAFE_INTEGER))).toEqual([]);
    state.down = false;
    writer.record(entry(3));
    await writer.close();
    expect((await collectAudit(store.scanAudit(Number.MAX_SAFE_INTEGER))).map((e) => e.id)).toEqual(["e3", "e2", "e1"]);
  });

  it("opens entries in one store call per batch, and their outcomes replace them", async () => {
    const { store, state } = observedStore();
    const writer = createAuditWriter(store, 1000, createLogger("test", "silent"));
    expect(await Promise.all([writer.open(opening(1)), writer.open(opening(2))])).toEqual([true, true]);
    expect(state.opens).toBe(1);
    const shown = async () => (await collectAudit(store.scanAudit(Number.MAX_SAFE_INTEGER))).map((e) => [e.id, e.status, e.msg]);
    expect(await shown()).toEqual([
      ["e2", 0, NO_OUTCOME],
      ["e1", 0, NO_OUTCOME],
    ]);
    writer.record(entry(1));
    await writer.flushed();
    expect(await shown()).toEqual([
      ["e2", 0, NO_OUTCOME],
      ["e1", 200, ""],
    ]);
    await writer.close();
  });

  it("an entry the store refused to open has its outcome write waited for, and retried until stored", async () => {
    const { store, state } = observedStore();
    const writer = createAuditWriter(store, 1000, createLogger("test", "silent"));
    state.down = true;
    expect(writer.failing).toBe(false);
    expect(await writer.open(entry(1))).toBe(false); // the call goes on: its outcome write is what stores it
    // the store is known to fail (the guard then opens entries before running calls), and why is kept for the answers
    expect([writer.failing, writer.refusal]).toEqual([true, "Redis at 127.0.0.1:1 is unavailable (test)"]);
    const waited = writer.record(entry(1), true);
    expect(waited).toBeInstanceOf(Promise);
    // false once the first attempt failed: the store is down, the answer is not held for it (and must not be a success)
    expect(await waited).toBe(false);
    state.down = false;
    await expect.poll(async () => (await collectAudit(store.scanAudit(Number.MAX_SAFE_INTEGER))).map((e) => e.id), { timeout: 3000 }).toEqual(["e1"]);
    // an outcome write stored in time says so
    expect(await writer.record(entry(2), true)).toBe(true);
    // the first open stored ends the failing state
    expect(writer.failing).toBe(true);
    expect(await writer.open(opening(3))).toBe(true);
    expect(writer.failing).toBe(false);
    await writer.close();
  });

  it("an outcome whose open entry the store no longer has is stored whole", async () => {
    const { store, state } = observedStore();
    const writer = createAuditWriter(store, 1000, createLogger("test", "silent"));
    state.loseOpens = true; // acknowledged, then lost (a failover without a replica that had it)
    expect(await writer.open(opening(1))).toBe(true);
    writer.record(entry(1));
    await writer.flushed();
    expect(await collectAudit(store.scanAudit(ALL))).toEqual([entry(1)]);
    expect(state.calls).toBe(2); // the close found nothing, the append stored it
    await writer.close();
  });

  it("on the embedded store, which dies with the process, entries are not opened: each is stored once, whole, before the answer", async () => {
    const { store, state } = observedStore("embedded");
    const writer = createAuditWriter(store, 1000, createLogger("test", "silent"));
    expect(writer.opensEntries).toBe(false);
    const stored = async () => (await collectAudit(store.scanAudit(ALL))).map((e) => `${e.id}:${e.status}`);
    // refused calls (never opened) do not wait either: nothing a store failure could lose
    for (const [i, refused] of [[1, false], [2, true], [3, false]] as const) {
      expect(writer.record(entry(i), refused)).toBeUndefined();
      expect(state.calls).toBe(i); // in the store before record() returns, so before the call's answer
    }
    expect(await stored()).toEqual(["e3:200", "e2:200", "e1:200"]);
    expect(state.opens).toBe(0);
    await writer.close();
    // a writer for Redis opens entries
    const onRedis = createAuditWriter(observedStore().store, 1000, createLogger("test", "silent"));
    expect(onRedis.opensEntries).toBe(true);
    await onRedis.close();
  });

  it("a close or an append that was applied though it failed is not stored again by its retry", async () => {
    const { store, state } = observedStore();
    const writer = createAuditWriter(store, 1000, createLogger("test", "silent"));
    await writer.open(opening(1));
    state.applyThenFail = 1;
    writer.record(entry(1)); // closed, the reply lost: the retry finds no open entry and would append it whole
    await expect.poll(() => state.calls, { timeout: 3000 }).toBeGreaterThanOrEqual(3);
    state.applyThenFail = 1;
    void writer.record(entry(2), true); // appended whole, the reply lost
    await expect.poll(() => state.calls, { timeout: 3000 }).toBeGreaterThanOrEqual(5);
    await writer.close();
    expect((await collectAudit(store.scanAudit(ALL))).map((e) => `${e.id}:${e.status}`)).toEqual(["e2:200", "e1:200"]);
  });

  it("a batch stored in part before a failure is retried without storing anything twice", async () => {
    const { store, state } = observedStore();
    const writer = createAuditWriter(store, 1000, createLogger("test", "silent"));
    await writer.open(opening(1));
    state.failAppends = 1;
    writer.record(entry(1)); // opened: closed in the first attempt
    void writer.record(entry(2), true); // never opened: appended whole, refused once
    await expect.poll(async () => (await collectAudit(store.scanAudit(ALL))).map((e) => `${e.id}:${e.status}`), { timeout: 3000 }).toEqual(["e2:200", "e1:200"]);
    await writer.close();
    expect((await collectAudit(store.scanAudit(ALL))).map((e) => e.id)).toEqual(["e2", "e1"]);
  });
});

/**
 * The unknown outcome as Redis makes it: a private server pauses writes (scripts included) past the client's command
 * timeout, so the outcome's close fails in the writer and its retries queue behind it; when the pause ends Redis runs the
 * first close (the entry goes into the log) and then the retries, which find no open entry and append it whole.
 */
describe.skipIf(!redisServerPath())("the audit writer on Redis, a write timed out and applied later", () => {
  it("stores the entry once", async () => {
    const redis = await startRedis();
    const client = await connectRedis(redis.url, { commandTimeoutMs: 200 });
    const admin = new Redis(redis.url);
    const namespace = systemNs();
    const store = await createRedisSecurityStore(client, { namespace, kind: "redis" });
    // The log is read back through another store with the default timeout: only the writer's writes are meant to time
    // out, and the test process itself can stall past 200 ms on CI's two loaded cores.
    const reader = await createRedisSecurityStore(await connectRedis(redis.url), { namespace, kind: "redis" });
    try {
      const writer = createAuditWriter(store, 1000, createLogger("test", "silent"));
      await writer.open(opening(1));
      await admin.call("CLIENT", "PAUSE", "1500", "WRITE");
      writer.record(entry(1));
      await writer.close(); // returns once a write of the outcome succeeded: after the pause
      // a page shows the log as stored (a scan drops repeated ids)
      expect((await reader.readAuditPage(0, 10, ALL)).entries.map((e) => `${e.id}:${e.status}`)).toEqual(["e1:200"]);
    } finally {
      await store.close();
      await reader.close();
      admin.disconnect();
      await redis.stop();
    }
  }, 20_000);
});
