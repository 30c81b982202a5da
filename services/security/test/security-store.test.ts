import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectAudit, NO_OUTCOME, type SecurityChange, type SecurityStore, type UserRecord } from "../src/store/security-store.js";
import { connectRedis, quitQuietly, runScript } from "@gov/redis";
import { REMOVE_ROLE, securityKeys } from "../src/store/redis-security-scripts.js";
import { openSecurityStoreOn, securityTargets, systemNs } from "./harness.js";

const user = (username: string, extra: Partial<UserRecord> = {}): UserRecord => ({ username, salt: "s", hash: "h", roles: [], locked: false, lockedUntil: 0, failures: 0, ...extra });
/** Show every open entry, whatever its age. */
const ALL = Number.MAX_SAFE_INTEGER;
const audit = (i: number) => ({ id: `id${i}`, operator: "op", ip: "1.2.3.4", resource: `/v1/x/${i}`, action: "PUT", status: 200, msg: "", opTime: 1_700_000_000_000 + i });

/** One contract for the embedded store, Redis and Redis Cluster: the same answers and the same change events. */
// The Cluster once more with gov.redis.min-replicas=1: every write through the durable path (see harness.ts).
const targets = [...securityTargets(), ...securityTargets().filter((t) => t.name === "redis-cluster").map((t) => ({ ...t, waitForReplica: true }))];
for (const target of targets) {
  const waits = "waitForReplica" in target;
  describe.skipIf(target.skip)(`security store contract: ${target.name}${waits ? ", writes waiting for a replica" : ""}`, () => {
    let store: SecurityStore;
    /** A second handle on the same data (another replica); the embedded store has only one. */
    let replica: SecurityStore;
    let namespace: string;
    beforeAll(async () => {
      namespace = systemNs();
      store = await openSecurityStoreOn(target.url, namespace, target.name, waits);
      replica = target.url ? await openSecurityStoreOn(target.url, namespace, target.name, waits) : store;
    });
    afterAll(async () => {
      if (replica !== store) await replica?.close();
      await store?.close();
    });

    it("users: add once, update only what exists, remove; roles survive a round trip", async () => {
      expect(await store.addUser(user("ann", { roles: ["a", "b"] }))).toBe(true);
      expect(await store.addUser(user("ann"))).toBe(false);
      expect(await replica.getUser("ann")).toEqual(user("ann", { roles: ["a", "b"] }));
      expect(await store.updateUser("ann", { roles: [], locked: true })).toBe(true);
      expect(await replica.getUser("ann")).toMatchObject({ roles: [], locked: true });
      expect(await store.updateUser("nobody", { locked: true })).toBe(false);
      expect(await store.getUser("nobody")).toBeUndefined();
      expect((await store.listUsers()).map((u) => u.username)).toEqual(["ann"]);
      expect(await store.removeUser("ann")).toBe(true);
      expect(await store.removeUser("ann")).toBe(false);
      expect(await store.updateUser("ann", { locked: false })).toBe(false); // a write after a delete does not resurrect it
      expect(await store.getUser("ann")).toBeUndefined();
    });

    it("password attempts are charged atomically: at most the maximum pass, the next one locks, a lock charges nothing", async () => {
      await store.addUser(user("bo"));
      const charged = await Promise.all(Array.from({ length: 5 }, () => store.chargeAttempt("bo", 3, 12345, 100)));
      expect(charged.filter((c) => typeof c === "number").sort()).toEqual([1, 2, 3]);
      expect(charged.filter((c) => c === "locked")).toHaveLength(2);
      expect(await store.getUser("bo")).toMatchObject({ failures: 0, lockedUntil: 12345 });
      expect(await store.chargeAttempt("bo", 3, 99999, 12344)).toBe("locked"); // still locked at 12344: nothing counted
      expect(await store.getUser("bo")).toMatchObject({ failures: 0, lockedUntil: 12345 });
      expect(await store.chargeAttempt("bo", 3, 99999, 12345)).toBe(1); // the lock is over at 12345
      expect(await replica.getUser("bo")).toMatchObject({ failures: 1, lockedUntil: 12345 });
      await store.updateUser("bo", { locked: true });
      expect(await store.chargeAttempt("bo", 3, 99999, 20000)).toBe("locked"); // locked by an administrator
      expect(await store.chargeAttempt("ghost", 3, 1, 0)).toBe("no-user"); // unknown users leave no trace
      expect(await store.getUser("ghost")).toBeUndefined();
    });

    it("roles: put replaces, remove answers whether it existed", async () => {
      await store.putRole({ name: "dev", desc: "d", bindings: [{ namespace: "{dev}", action: "r" }] });
      await store.putRole({ name: "dev", desc: "d2", bindings: [{ namespace: "{dev}", action: "rw" }, { namespace: "{x}", action: "w" }] });
      expect(await replica.getRole("dev")).toEqual({ name: "dev", desc: "d2", bindings: [{ namespace: "{dev}", action: "rw" }, { namespace: "{x}", action: "w" }] });
      await store.putRole({ name: "empty", desc: "", bindings: [] });
      expect((await store.listRoles()).map((r) => r.name).sort()).toEqual(["dev", "empty"]);
      expect(await store.getRole("empty")).toEqual({ name: "empty", desc: "", bindings: [] });
      expect(await store.removeRole("empty")).toBe(true);
      expect(await store.removeRole("empty")).toBe(false);
    });

    it("removing a role unbinds it from its users, so that a role created later under its name grants them nothing", async () => {
      await store.putRole({ name: "ops/1", desc: "", bindings: [{ namespace: "{ops}", action: "rw" }] });
      await store.addUser(user("dee", { roles: ["ops/1", "keep"] }));
      await store.addUser(user("eve", { roles: ["ops/1"] }));
      await store.addUser(user("fay", { roles: ["keep"] }));
      expect(await store.removeRole("ops/1")).toBe(true);
      expect(await replica.getUser("dee")).toMatchObject({ roles: ["keep"] });
      expect(await replica.getUser("eve")).toMatchObject({ roles: [] });
      expect(await replica.getUser("fay")).toMatchObject({ roles: ["keep"] });
      for (const name of ["dee", "eve", "fay"]) await store.removeUser(name);
    });

    it("a role held by 6,000 users (more than one script may declare) is removed and unbound from each", async () => {
      const names = Array.from({ length: 6000 }, (_, i) => `many-${i}`);
      for (let i = 0; i < names.length; i += 500) {
        await Promise.all(names.slice(i, i + 500).map((n, j) => store.addUser(user(n, { roles: (i + j) % 2 ? ["big", "keep"] : ["big"] }))));
      }
      await store.putRole({ name: "big", desc: "", bindings: [{ namespace: "{big}", action: "r" }] });
      expect(await store.removeRole("big")).toBe(true);
      expect(await replica.getRole("big")).toBeUndefined();
      const held = (await replica.listUsers()).filter((u) => u.username.startsWith("many-"));
      expect(held).toHaveLength(6000);
      expect(held.filter((u) => u.roles.includes("big"))).toEqual([]);
      expect(held.filter((u) => u.roles.includes("keep"))).toHaveLength(3000);
      expect(await store.putRole({ name: "big", desc: "", bindings: [] })).toBe("saved"); // the removal finished
      await store.removeRole("big");
      for (let i = 0; i < names.length; i += 500) await Promise.all(names.slice(i, i + 500).map((n) => store.removeUser(n)));
    }, 60_000);

    it.skipIf(!target.url)("a removal cut short after its first step: the role grants nothing; saving it is refused until it is removed again", async () => {
      await store.putRole({ name: "cut", desc: "", bindings: [{ namespace: "{cut}", action: "rw" }] });
      await store.addUser(user("hal", { roles: ["cut"] }));
      // only the first step, as a process that died right after it leaves it
      const keys = securityKeys(namespace);
      const raw = await connectRedis(target.url!);
      try {
        expect(await runScript(raw, REMOVE_ROLE, [keys.roles, keys.rolesRemoving], [keys.channel, "cut"])).toBe(1);
      } finally {
        await quitQuietly(raw);
      }
      expect(await replica.getRole("cut")).toBeUndefined();
      expect(await replica.bindRoles("hal", ["cut"], ["cut"])).toEqual({ missingRole: "cut" });
      expect(await replica.putRole({ name: "cut", desc: "", bindings: [] })).toBe("removal-unfinished");
      expect(await replica.getRole("cut")).toBeUndefined();
      expect(await store.removeRole("cut")).toBe(true); // finishes it
      expect(await replica.getUser("hal")).toMatchObject({ roles: [] });
      expect(await replica.putRole({ name: "cut", desc: "new", bindings: [] })).toBe("saved");
      expect(await replica.getUser("hal")).toMatchObject({ roles: [] }); // the new role is not the old one's
      expect(await store.removeRole("cut")).toBe(true);
      expect(await store.removeRole("cut")).toBe(false);
      await store.removeUser("hal");
    });

    it("binding roles checks, in the same step, that each role exists: a role removed meanwhile is never left bound", async () => {
      await store.putRole({ name: "qa", desc: "", bindings: [{ namespace: "{qa}", action: "rw" }] });
      await store.addUser(user("gus", { roles: ["old"] }));
      expect(await store.bindRoles("gus", ["qa", "admin"], ["qa"])).toBe("bound"); // "admin": built in, not stored
      expect(await replica.getUser("gus")).toMatchObject({ roles: ["qa", "admin"] });
      expect(await store.bindRoles("nobody", ["qa"], ["qa"])).toBe("no-user");
      expect(await store.getUser("nobody")).toBeUndefined();
      // the role's removal is one step, the bind that follows another: it finds the role gone and writes nothing
      await store.removeRole("qa");
      expect(await replica.bindRoles("gus", ["qa"], ["qa"])).toEqual({ missingRole: "qa" });
      expect(await store.getUser("gus")).toMatchObject({ roles: ["admin"] });
      await store.putRole({ name: "1", desc: "", bindings: [] }); // a role named like the script's "bound" answer
      expect(await store.bindRoles("gus", ["1", "2"], ["1", "2"])).toEqual({ missingRole: "2" });
      expect(await store.bindRoles("gus", ["1"], ["1"])).toBe("bound");
      await store.removeRole("1");
      await store.removeUser("gus");
    });

    it("audit: batches append in order, newest first, the oldest dropped past the retention", async () => {
      await store.appendAudit([audit(1), audit(2), audit(3)], 4);
      await store.appendAudit([audit(4), audit(5)], 4);
      expect((await collectAudit(replica.scanAudit(ALL))).map((e) => e.id)).toEqual(["id5", "id4", "id3", "id2"]);
      expect((await collectAudit(store.scanAudit(ALL)))[0]).toEqual(audit(5));
      const page = async (offset: number, limit: number) => {
        const { entries, total } = await replica.readAuditPage(offset, limit, ALL);
        return [entries.map((e) => e.id), total];
      };
      expect(await page(1, 2)).toEqual([["id4", "id3"], 4]);
      expect(await page(3, 5)).toEqual([["id2"], 4]);
      expect(await page(10, 2)).toEqual([[], 4]);
      expect((await replica.readAuditPage(0, 1, ALL)).entries[0]).toEqual(audit(5));
    });

    it("audit: a retry's append skips the entries already among the newest it names, and appends the rest", async () => {
      const ns = systemNs();
      const own = await openSecurityStoreOn(target.url, ns, target.name, waits);
      try {
        await own.appendAudit([audit(41), audit(42), audit(43)], 100);
        await own.openAudit([{ ...audit(44), status: 0, msg: "no outcome" }]);
        // id41 is the third newest: looked for among the two newest it is not found, so it comes again
        await own.appendAudit([audit(41), audit(42), audit(43), audit(44), audit(45)], 100, 2);
        // a page shows the log as stored (a scan drops repeated ids)
        const ids = async () => (await own.readAuditPage(0, 100, ALL)).entries.map((e) => `${e.id}:${e.status}`);
        expect(await ids()).toEqual(["id45:200", "id44:200", "id41:200", "id43:200", "id42:200", "id41:200"]);
        // everything already logged: nothing appended, the log as it was
        await own.appendAudit([audit(44), audit(45)], 100, 10);
        expect(await ids()).toEqual(["id45:200", "id44:200", "id41:200", "id43:200", "id42:200", "id41:200"]);
      } finally {
        await own.close();
      }
    });

    it("audit: a scan reads the log a part at a time, newest first, the open entries in the first part", async () => {
      const ns = systemNs();
      const own = await openSecurityStoreOn(target.url, ns, target.name, waits);
      try {
        const many = Array.from({ length: 4_500 }, (_, i) => audit(1000 + i));
        for (let i = 0; i < many.length; i += 1_500) await own.appendAudit(many.slice(i, i + 1_500), 10_000);
        await own.openAudit([{ ...audit(9_999), status: 0, msg: "no outcome" }]);
        const parts: string[][] = [];
        for await (const part of own.scanAudit(ALL)) parts.push(part.map((e) => e.id));
        expect(parts.length).toBeGreaterThanOrEqual(4); // the open entries, then the log in parts of at most 2,000
        expect(parts[0]).toEqual(["id9999"]);
        expect(Math.max(...parts.map((p) => p.length))).toBeLessThanOrEqual(2_000);
        expect(parts.flat()).toEqual(["id9999", ...many.map((e) => e.id).reverse()]);
        expect((await collectAudit(own.scanAudit(ALL))).map((e) => e.id)).toEqual(parts.flat());
      } finally {
        await own.close();
      }
    });

    it("audit: open entries are read before the log (once old enough), replaced by their outcome, swept when orphaned", async () => {
      const open = (i: number) => ({ ...audit(i), status: 0, msg: "no outcome" });
      await store.appendAudit([audit(11), audit(12)], 2); // the log: just these two

      await store.openAudit([open(13), open(14), open(15)]);
      const ids = async (before = ALL) => (await collectAudit(replica.scanAudit(before))).map((e) => `${e.id}:${e.status}`);
      expect(await ids()).toEqual(["id15:0", "id14:0", "id13:0", "id12:200", "id11:200"]);
      expect(await ids(audit(14).opTime)).toEqual(["id13:0", "id12:200", "id11:200"]); // younger open entries: calls under way
      const page = async (offset: number, limit: number, before = ALL) => {
        const { entries, total } = await replica.readAuditPage(offset, limit, before);
        return [entries.map((e) => e.id), total];
      };
      expect(await page(0, 2)).toEqual([["id15", "id14"], 5]);
      expect(await page(2, 2)).toEqual([["id13", "id12"], 5]);
      expect(await page(3, 5)).toEqual([["id12", "id11"], 5]);
      expect(await page(1, 2, audit(14).opTime)).toEqual([["id12", "id11"], 3]);
      // the outcome replaces the open entry (no duplicate), at the head of the log
      await store.appendAudit([{ ...audit(14), status: 403, msg: "denied" }], 10);
      expect(await ids()).toEqual(["id15:0", "id13:0", "id14:403", "id12:200", "id11:200"]);
      // a sweep moves what is older than its bound into the log as it is, once
      expect(await store.sweepAudit(audit(15).opTime, 10)).toBe(1);
      expect(await replica.sweepAudit(audit(15).opTime, 10)).toBe(0);
      expect(await ids(0)).toEqual(["id13:0", "id14:403", "id12:200", "id11:200"]);
      expect(await ids()).toEqual(["id15:0", "id13:0", "id14:403", "id12:200", "id11:200"]);
    });

    it("audit: what a client sent comes back as sent — newlines, quotes, backslashes, non-ASCII, empty fields", async () => {
      const odd = (i: number) => ({ ...audit(i), operator: "", resource: `/v1/a\nb\\n"c"/${i}`, msg: `line 1\nline 2\r\n\t✓ 日本 \u2028 "q" \\`, ip: "" });
      await store.openAudit([{ ...odd(21), status: 0 }, { ...odd(22), status: 0 }]);
      expect((await collectAudit(replica.scanAudit(ALL))).filter((e) => e.id === "id21" || e.id === "id22")).toEqual([{ ...odd(22), status: 0 }, { ...odd(21), status: 0 }]);
      await store.appendAudit([odd(21), odd(22)], 100);
      const logged = (await collectAudit(replica.scanAudit(ALL))).filter((e) => e.id === "id21" || e.id === "id22");
      expect(logged).toEqual([odd(22), odd(21)]); // the open entries replaced, not kept beside their outcomes
    });

    it("audit: closing opened entries stores each with its outcome, as appending it whole would; others are answered back", async () => {
      const odd = (i: number) => ({ ...audit(i), resource: `/v1/q"\\n/${i}`, msg: "" });
      const opened = (i: number) => ({ ...odd(i), status: 0, msg: NO_OUTCOME });
      await store.openAudit([opened(31), opened(32), { ...odd(33), status: 0, msg: "another writer's text" }]);
      const missing = await store.closeAudit(
        [
          { id: "id31", status: 200, msg: "" },
          { id: "id32", status: 403, msg: 'no "w"\npermission ✓' },
          { id: "id33", status: 200, msg: "" }, // open, but not as this writer opens entries
          { id: "id34", status: 200, msg: "" }, // never opened (or lost by a failover)
        ],
        100,
      );
      expect(missing).toEqual(["id33", "id34"]);
      const mine = (await collectAudit(replica.scanAudit(ALL))).filter((e) => ["id31", "id32", "id33", "id34"].includes(e.id));
      expect(mine).toEqual([{ ...odd(33), status: 0, msg: "another writer's text" }, { ...odd(32), status: 403, msg: 'no "w"\npermission ✓' }, { ...odd(31), status: 200 }]);
      // the log's text is what appending the entry whole stores: the same when read through a page
      const page = (await replica.readAuditPage(0, 10, ALL)).entries.filter((e) => e.id === "id32");
      expect(page).toEqual([{ ...odd(32), status: 403, msg: 'no "w"\npermission ✓' }]);
      expect(await store.closeAudit([{ id: "id31", status: 500, msg: "again" }], 100)).toEqual(["id31"]); // closed once only
    });

    it("the JWT key: the first one stored wins, every replica gets it", async () => {
      const first = await store.jwtKey("key-one");
      expect(first).toBe("key-one");
      expect(await replica.jwtKey("key-two")).toBe("key-one");
    });

    it("every change is announced to every replica (what keeps their caches honest)", async () => {
      const seen: SecurityChange[] = [];
      const stop = replica.onChange((c) => seen.push(c));
      try {
        await store.addUser(user("cy"));
        await store.updateUser("cy", { locked: true });
        await store.putRole({ name: "r1", desc: "", bindings: [] });
        await store.removeRole("r1");
        await store.removeUser("cy");
        // (on a Cluster, announcements of the earlier tests may still be arriving: only this test's names count)
        await expect.poll(() => seen.filter((c) => c.kind !== "all" && (c.name === "cy" || c.name === "r1")), { timeout: 5000 }).toEqual([
          { kind: "user", name: "cy" },
          { kind: "user", name: "cy" },
          { kind: "role", name: "r1" },
          { kind: "role", name: "r1" },
          { kind: "user", name: "cy" },
        ]);
      } finally {
        stop();
      }
    });
  });
}
