import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectRedis, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import type { ConfigStore } from "../src/store/config-store.js";
import { createRedisConfigStore } from "../src/store/redis-config-store.js";
import { configKeys } from "../src/store/redis-config-scripts.js";
import { freshNamespace } from "./config-store.contract.js";

/**
 * The history log the write scripts keep (a list trimmed at its head) beside the history hash: what the contract
 * suite cannot see from outside — that trimming leaves no orphaned archived records behind, also when the retention
 * shrinks between writes, and that numbering after a delete continues from the log.
 */
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`Redis config history on ${target.name}`, () => {
    let raw: RedisClient;
    const stores: ConfigStore[] = [];
    const open = async (maxVersions: number) => {
      const store = await createRedisConfigStore(await connectRedis(target.url), { maxVersions });
      stores.push(store);
      return store;
    };
    beforeAll(async () => {
      raw = await connectRedis(target.url);
    });
    afterAll(async () => {
      await Promise.all([...stores.map((s) => s.close()), raw?.quit()]);
    });

    const set = (s: ConfigStore, ns: string, data: string) => s.set(ns, "app", data, sha(data), Date.now());
    const archivedFields = async (ns: string) => (await raw.hkeys(configKeys(ns, "app")[2])).map(Number).sort((a, b) => a - b);

    it("drops the history hash entries together with the log entries, also after the retention shrank", async () => {
      const ns = freshNamespace();
      const wide = await open(5);
      for (let i = 1; i <= 8; i++) await set(wide, ns, `v${i}`); // current v8; archived 3..7
      expect(await archivedFields(ns)).toEqual([3, 4, 5, 6, 7]);
      expect((await wide.versions(ns, "app")).map((v) => v.version)).toEqual([7, 6, 5, 4, 3]);

      const narrow = await open(2); // e.g. gov.config.history.max-versions lowered and the service restarted
      expect(await set(narrow, ns, "v9")).toEqual({ changed: true, version: 9 });
      expect(await archivedFields(ns)).toEqual([7, 8]);
      expect((await narrow.versions(ns, "app")).map((v) => v.version)).toEqual([8, 7]);
      expect((await narrow.version(ns, "app", 7))?.data).toBe("v7");
      expect(await narrow.version(ns, "app", 6)).toBeUndefined();
    });

    it("drops more archived versions at once than one Lua unpack() can take when the retention shrinks a lot", async () => {
      const ns = freshNamespace();
      // Lua 5.1 unpacks at most ~8,000 values (LUAI_MAXCSTACK): drop more than that in one write.
      const wide = await open(8500);
      await Promise.all(Array.from({ length: 8501 }, (_, i) => set(wide, ns, `v${i + 1}`))); // all in flight at once
      expect((await wide.get(ns, "app"))?.version).toBe(8501);
      expect(await raw.hlen(configKeys(ns, "app")[2])).toBe(8500);

      const narrow = await open(1);
      expect(await set(narrow, ns, "last")).toEqual({ changed: true, version: 8502 });
      expect(await archivedFields(ns)).toEqual([8501]);
      expect(await narrow.versions(ns, "app")).toHaveLength(1);
    });

    it("numbers on from the newest archived version after a delete, and rolls back to it", async () => {
      const ns = freshNamespace();
      const store = await open(3);
      for (let i = 1; i <= 4; i++) await set(store, ns, `v${i}`);
      expect(await store.remove(ns, "app", Date.now())).toBe(true);
      expect((await store.versions(ns, "app")).map((v) => [v.version, v.op])).toEqual([
        [4, "remove"],
        [3, "set"],
        [2, "set"],
      ]);
      expect(await set(store, ns, "after delete")).toEqual({ changed: true, version: 5 });
      expect(await store.rollback(ns, "app", 4, Date.now())).toEqual({ changed: true, version: 6 });
      expect((await store.get(ns, "app"))?.data).toBe("v4");
      expect(await store.list(ns)).toEqual(["app"]);
    });
  });
}
