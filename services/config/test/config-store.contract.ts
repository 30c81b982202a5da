import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConfigChange, ConfigStore } from "../src/store/config-store.js";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
let seq = 0;
/** A fresh namespace per test so suites sharing one Redis never see each other's data. */
export const freshNamespace = (label = "t") => `${label}-{c${process.pid}x${Date.now().toString(36)}x${seq++}}`;

/**
 * The behaviour every ConfigStore adapter must show. `open` creates a store with maxVersions = 5;
 * stores opened twice must share data (two processes on one Redis; the embedded store returns the same instance).
 */
export function describeConfigStoreContract(name: string, open: () => Promise<ConfigStore>, skip = "") {
  describe.skipIf(skip)(`ConfigStore contract: ${name}`, () => {
    let store: ConfigStore;
    beforeAll(async () => {
      store = await open();
    });
    afterAll(async () => {
      await store?.close();
    });

    it("create → v1, update → v2, identical content → unchanged, list is sorted", async () => {
      const ns = freshNamespace();
      expect(await store.set(ns, "b.yaml", "x: 1", sha("x: 1"), 1000)).toEqual({ changed: true, version: 1 });
      expect(await store.set(ns, "b.yaml", "x: 2", sha("x: 2"), 2000)).toEqual({ changed: true, version: 2 });
      expect(await store.set(ns, "b.yaml", "x: 2", sha("x: 2"), 3000)).toEqual({ changed: false, version: 2 });
      await store.set(ns, "a.yaml", "a", sha("a"), 1000);
      expect(await store.list(ns)).toEqual(["a.yaml", "b.yaml"]);
      expect(await store.get(ns, "b.yaml")).toEqual({ configId: "b.yaml", data: "x: 2", hash: sha("x: 2"), version: 2, createTime: 2000 });
      expect(await store.versions(ns, "b.yaml")).toEqual([{ configId: "b.yaml", version: 1, op: "set", opTime: 2000 }]);
      expect(await store.version(ns, "b.yaml", 1)).toEqual({
        configId: "b.yaml", data: "x: 1", hash: sha("x: 1"), version: 1, createTime: 1000, op: "set", opTime: 2000,
      });
    });

    it("rollback writes a new version with the target's content; unknown target → undefined", async () => {
      const ns = freshNamespace();
      await store.set(ns, "app", "one", sha("one"), 1);
      await store.set(ns, "app", "two", sha("two"), 2);
      expect(await store.rollback(ns, "app", 1, 3)).toEqual({ changed: true, version: 3 });
      const cur = await store.get(ns, "app");
      expect(cur).toMatchObject({ data: "one", version: 3, hash: sha("one") });
      expect((await store.versions(ns, "app")).map((v) => [v.version, v.op])).toEqual([[2, "rollback"], [1, "set"]]);
      expect(await store.rollback(ns, "app", 9, 4)).toBeUndefined();
      expect(await store.rollback(ns, "missing", 1, 4)).toBeUndefined();
      // the target's content is current already: a rollback still writes its version (a set would not)
      expect(await store.rollback(ns, "app", 3, 5)).toEqual({ changed: true, version: 4 });
      expect(await store.rollback(ns, "app", 1, 6)).toEqual({ changed: true, version: 5 });
      expect(await store.get(ns, "app")).toMatchObject({ data: "one", version: 5, hash: sha("one") });
      expect((await store.versions(ns, "app")).map((v) => [v.version, v.op])).toEqual([[4, "rollback"], [3, "rollback"], [2, "rollback"], [1, "set"]]);
      expect(await store.set(ns, "app", "one", sha("one"), 7)).toEqual({ changed: false, version: 5 });
    });

    it("delete archives with op remove; rollback after delete restores it as a new version", async () => {
      const ns = freshNamespace();
      await store.set(ns, "gone", "v1", sha("v1"), 10);
      expect(await store.remove(ns, "gone", 20)).toBe(true);
      expect(await store.remove(ns, "gone", 21)).toBe(false);
      expect(await store.get(ns, "gone")).toBeUndefined();
      expect(await store.list(ns)).toEqual([]);
      expect(await store.versions(ns, "gone")).toEqual([{ configId: "gone", version: 1, op: "remove", opTime: 20 }]);
      expect(await store.rollback(ns, "gone", 1, 30)).toEqual({ changed: true, version: 2 });
      expect(await store.get(ns, "gone")).toMatchObject({ data: "v1", version: 2 });
      expect(await store.list(ns)).toEqual(["gone"]);
      // setting again after a delete continues the numbering
      await store.remove(ns, "gone", 40);
      expect(await store.set(ns, "gone", "v3", sha("v3"), 50)).toEqual({ changed: true, version: 3 });
    });

    it("create writes only where the config has no current version (after a delete too); else nothing, undefined", async () => {
      const ns = freshNamespace();
      expect(await store.create(ns, "c", "one", sha("one"), 1)).toEqual({ changed: true, version: 1 });
      expect(await store.create(ns, "c", "two", sha("two"), 2)).toBeUndefined();
      expect(await store.create(ns, "c", "one", sha("one"), 3)).toBeUndefined();
      expect(await store.get(ns, "c")).toMatchObject({ data: "one", version: 1, createTime: 1 });
      expect(await store.versions(ns, "c")).toEqual([]);
      await store.remove(ns, "c", 4);
      expect(await store.create(ns, "c", "three", sha("three"), 5)).toEqual({ changed: true, version: 2 });
      expect(await store.get(ns, "c")).toMatchObject({ data: "three", version: 2 });
      expect(await store.list(ns)).toEqual(["c"]);
    });

    it("keeps at most maxVersions superseded versions, dropping the oldest", async () => {
      const ns = freshNamespace();
      for (let i = 1; i <= 8; i++) await store.set(ns, "h", `v${i}`, sha(`v${i}`), i);
      expect((await store.versions(ns, "h")).map((v) => v.version)).toEqual([7, 6, 5, 4, 3]);
      expect(await store.version(ns, "h", 2)).toBeUndefined();
      expect(await store.version(ns, "h", 3)).toMatchObject({ data: "v3" });
    });

    it("ids with ':', '/', spaces and unicode, and namespaces that share a hash tag, stay distinct", async () => {
      const tag = freshNamespace("x").replace(/^x-/, "");
      const a = tag; // {tag}
      const b = `cosky-${tag}`; // cosky-{tag}: same slot, different data set
      for (const id of ["a:b", "dir/app.yaml", "with space", "配置.yaml"]) {
        await store.set(a, id, `A ${id}`, sha(`A ${id}`), 1);
      }
      await store.set(b, "a:b", "B", sha("B"), 1);
      expect(await store.list(a)).toEqual(["a:b", "dir/app.yaml", "with space", "配置.yaml"].sort());
      expect(await store.list(b)).toEqual(["a:b"]);
      expect((await store.get(a, "dir/app.yaml"))?.data).toBe("A dir/app.yaml");
      expect((await store.get(b, "a:b"))?.data).toBe("B");
    });

    it("stores large and binary-unsafe text exactly", async () => {
      const ns = freshNamespace();
      const data = "é\u0000\r\n".repeat(1000) + "x".repeat(512 * 1024);
      await store.set(ns, "big", data, sha(data), 1);
      expect((await store.get(ns, "big"))?.data).toBe(data);
    });

    it("publishes every change to subscribers, including those of a second store on the same data", async () => {
      const ns = freshNamespace();
      const other = await open();
      const seen: ConfigChange[] = [];
      const unsubscribe = other.subscribe((c) => c.namespace === ns && seen.push(c));
      try {
        await new Promise((r) => setTimeout(r, 100)); // let a Redis subscription settle
        await store.set(ns, "e", "1", sha("1"), 1);
        await store.set(ns, "e", "2", sha("2"), 2);
        await store.rollback(ns, "e", 1, 3);
        await store.remove(ns, "e", 4);
        await expect.poll(() => seen.length, { timeout: 3000 }).toBe(4);
        expect(seen).toEqual([
          { namespace: ns, configId: "e", op: "set", version: 1 },
          { namespace: ns, configId: "e", op: "set", version: 2 },
          { namespace: ns, configId: "e", op: "rollback", version: 3 },
          { namespace: ns, configId: "e", op: "remove", version: 3 },
        ]);
      } finally {
        unsubscribe();
        if (other !== store) await other.close();
      }
    });

    it("a read after another store's write sees the new version (no stale cache)", async () => {
      const ns = freshNamespace();
      const other = await open();
      try {
        await store.set(ns, "c", "1", sha("1"), 1);
        expect((await store.get(ns, "c"))?.version).toBe(1); // warm any cache
        await other.set(ns, "c", "2", sha("2"), 2);
        await expect.poll(async () => (await store.get(ns, "c"))?.data, { timeout: 3000 }).toBe("2");
        await other.remove(ns, "c", 3);
        await expect.poll(async () => store.get(ns, "c"), { timeout: 3000 }).toBeUndefined();
      } finally {
        if (other !== store) await other.close();
      }
    });

    it("count: configs with a current version, without scanning", async () => {
      const ns = freshNamespace();
      expect(await store.count(ns)).toBe(0);
      await store.set(ns, "a", "1", sha("1"), 1);
      await store.set(ns, "b", "1", sha("1"), 1);
      await store.set(ns, "a", "2", sha("2"), 2);
      expect(await store.count(ns)).toBe(2);
      await store.remove(ns, "b", 3);
      expect(await store.count(ns)).toBe(1);
    });

    it("deleteNamespace removes every config and all history (also of configs removed before); other namespaces keep theirs", async () => {
      const ns = freshNamespace();
      const sibling = `cosky-${ns.slice(ns.indexOf("{"))}`; // same hash tag, different namespace
      await store.set(sibling, "a", "keep", sha("keep"), 1);
      await store.set(ns, "a", "1", sha("1"), 1);
      await store.set(ns, "a", "2", sha("2"), 2);
      await store.set(ns, "gone", "g", sha("g"), 1);
      await store.remove(ns, "gone", 2);
      expect(await store.deleteNamespace(ns)).toBe(1);
      expect(await store.list(ns)).toEqual([]);
      expect(await store.count(ns)).toBe(0);
      expect(await store.get(ns, "a")).toBeUndefined();
      expect(await store.versions(ns, "a")).toEqual([]);
      expect(await store.versions(ns, "gone")).toEqual([]);
      expect(await store.version(ns, "gone", 1)).toBeUndefined();
      expect(await store.rollback(ns, "gone", 1, 3)).toBeUndefined(); // nothing left to revive
      expect(await store.deleteNamespace(ns)).toBe(0);
      expect((await store.get(sibling, "a"))?.data).toBe("keep");
      // a namespace recreated afterwards starts from version 1
      expect(await store.set(ns, "a", "new", sha("new"), 4)).toEqual({ changed: true, version: 1 });
    });

    it("deleteNamespace onlyIfEmpty: refused (undefined, nothing removed) while a config exists; else the leftover history goes", async () => {
      const ns = freshNamespace();
      await store.set(ns, "live", "1", sha("1"), 1);
      await store.set(ns, "gone", "1", sha("1"), 1);
      await store.remove(ns, "gone", 2);
      expect(await store.deleteNamespace(ns, { onlyIfEmpty: true })).toBeUndefined();
      expect((await store.get(ns, "live"))?.data).toBe("1");
      expect(await store.versions(ns, "gone")).toHaveLength(1);
      await store.remove(ns, "live", 3);
      expect(await store.deleteNamespace(ns, { onlyIfEmpty: true })).toBe(0);
      expect(await store.versions(ns, "gone")).toEqual([]);
      expect(await store.versions(ns, "live")).toEqual([]);
    });

    it("deleteNamespace announces a remove per config, and another store's cache and reads follow", async () => {
      const ns = freshNamespace();
      const other = await open();
      const seen: ConfigChange[] = [];
      const unsubscribe = other.subscribe((c) => c.namespace === ns && c.op === "remove" && seen.push(c));
      try {
        await store.set(ns, "x", "1", sha("1"), 1);
        await store.set(ns, "x", "2", sha("2"), 2);
        await store.set(ns, "y", "1", sha("1"), 1);
        expect((await other.get(ns, "x"))?.version).toBe(2); // warm any cache
        expect(await store.deleteNamespace(ns)).toBe(2);
        await expect.poll(() => seen.length, { timeout: 3000 }).toBe(2);
        expect(seen.sort((a, b) => a.configId.localeCompare(b.configId))).toEqual([
          { namespace: ns, configId: "x", op: "remove", version: 2 },
          { namespace: ns, configId: "y", op: "remove", version: 1 },
        ]);
        expect(await other.get(ns, "x")).toBeUndefined();
        expect(await store.get(ns, "x")).toBeUndefined();
      } finally {
        unsubscribe();
        if (other !== store) await other.close();
      }
    });
  });
}
