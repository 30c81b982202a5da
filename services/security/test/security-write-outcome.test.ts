import { connectRedis, WriteOutcomeUnknownError } from "@gov/redis";
import { pauseProcesses, resumeProcesses, startRedis, type RedisServer } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createRedisSecurityStore } from "../src/store/redis-security-store.js";
import type { SecurityStore, UserRecord } from "../src/store/security-store.js";
import { systemNs } from "./harness.js";

/**
 * User and role writes whose outcome is unknown (contract §3): a paused Redis (SIGSTOP) keeps its connections open and
 * queues what it is sent, so a write times out on the client yet is applied once the server resumes. The answer must
 * be "may or may not have been applied" with how to check (504 deadline_exceeded over the API, as config and registry
 * writes answer), never "retry when it is back", after which a created user would answer already_exists. A private
 * server: pausing the shared one would stall every other suite.
 */
const COMMAND_TIMEOUT_MS = 300;
const user = (username: string): UserRecord => ({ username, salt: "s", hash: "h", roles: [], locked: false, lockedUntil: 0, failures: 0 });

describe.skipIf(inject("redisSkipReason"))("security writes on a paused Redis", () => {
  let redis: RedisServer;
  let store: SecurityStore;
  // Only the writes sent while Redis is paused are meant to time out: the test process itself can stall past `store`'s
  // 300 ms on CI's two loaded cores. The writes before and the checks after go through another store on the same
  // namespace, its client with the default timeout (another process's, as it were).
  let steady: SecurityStore;
  beforeAll(async () => {
    redis = await startRedis();
    const namespace = systemNs();
    store = await createRedisSecurityStore(await connectRedis(redis.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS }), { namespace });
    steady = await createRedisSecurityStore(await connectRedis(redis.url), { namespace });
  });
  afterAll(async () => {
    if (redis?.pid) resumeProcesses([redis.pid]);
    await store?.close();
    await steady?.close();
    await redis?.stop();
  });

  it("say their outcome is unknown and how to check; after SIGCONT they show applied", async () => {
    expect(await steady.addUser(user("kept"))).toBe(true);
    expect(await steady.addUser(user("gone"))).toBe(true);
    await steady.putRole({ name: "old", desc: "", bindings: [] });
    const unpause = pauseProcesses([redis.pid!]);
    const failures: Record<string, unknown> = {};
    try {
      const attempt = async (name: string, write: () => Promise<unknown>) => {
        failures[name] = await write().then(() => "answered", (err: unknown) => err);
      };
      await attempt("addUser", () => store.addUser(user("new")));
      await attempt("updateUser", () => store.updateUser("kept", { locked: true }));
      await attempt("bindRoles", () => store.bindRoles("kept", ["old"], ["old"]));
      await attempt("removeUser", () => store.removeUser("gone"));
      await attempt("putRole", () => store.putRole({ name: "added", desc: "", bindings: [] }));
      await attempt("removeRole", () => store.removeRole("old"));
    } finally {
      unpause();
    }
    const expected: Record<string, RegExp> = {
      addUser: /^the creation of user "new" was sent to Redis but got no answer .*may or may not have been applied: list the users \(GET \/v1\/users, or ListUsers\).*creating it again answers already_exists$/,
      updateUser: /^the change to user "kept" .*may or may not have been applied: list the users .*whether it is locked.*check before sending the change again$/,
      bindRoles: /^the role binding of user "kept" .*may or may not have been applied: .*binding the same roles again is safe$/,
      removeUser: /^the removal of user "gone" .*may or may not have been applied: .*if it is not there, it was removed$/,
      putRole: /^the save of role "added" .*may or may not have been applied: read the role \(GET \/v1\/roles\/\{roleName\}, or GetRoleBind\)/,
      removeRole: /^the removal of role "old" .*may or may not have been applied: list the roles \(GET \/v1\/roles, or ListRoles\)/,
    };
    for (const [op, err] of Object.entries(failures)) {
      expect(err, op).toBeInstanceOf(WriteOutcomeUnknownError);
      expect((err as Error).message, op).toMatch(expected[op]);
    }
    // they were sent: Redis applies them once it runs again
    await expect.poll(async () => (await steady.getUser("new")) !== undefined, { timeout: 5000 }).toBe(true);
    expect(await steady.getUser("kept")).toMatchObject({ locked: true });
    expect(await steady.getUser("gone")).toBeUndefined();
    expect(await steady.getRole("added")).toBeDefined();
  });
});
