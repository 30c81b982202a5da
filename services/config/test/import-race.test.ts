import { createHash } from "node:crypto";
import { connectRedis } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { describe, expect, it } from "vitest";
import { importEntries } from "../src/import-configs.js";
import { createMemoryConfigStore } from "../src/store/memory-config-store.js";
import { createRedisConfigStore } from "../src/store/redis-config-store.js";
import type { ConfigStore } from "../src/store/config-store.js";
import { freshNamespace } from "./config-store.contract.js";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const never = new AbortController().signal;
const opts = { now: () => 2, hash: sha, signal: never };

/**
 * `store` as the import sees it, with another client's write of `configId` landing at the worst moment: right after
 * the import's first look at that config (a read) or right before its first write of it, whichever comes first.
 */
function racedBy(store: ConfigStore, configId: string, otherWrite: () => Promise<unknown>): ConfigStore {
  let raced = false;
  const race = async () => {
    if (raced) return;
    raced = true;
    await otherWrite();
  };
  return {
    ...store,
    async get(ns, id) {
      const r = await store.get(ns, id);
      if (id === configId) await race();
      return r;
    },
    async set(ns, id, ...rest) {
      if (id === configId) await race();
      return store.set(ns, id, ...rest);
    },
    async create(ns, id, ...rest) {
      if (id === configId) await race();
      return store.create(ns, id, ...rest);
    },
  };
}

function describeImportRace(name: string, open: () => Promise<[ConfigStore, ConfigStore]>, skip = "") {
  describe.skipIf(skip)(`import with policy skip, racing another writer, on ${name}`, () => {
    it("never replaces a config another client wrote after the import looked: it is skipped, and that write stays current", async () => {
      const [importer, other] = await open();
      try {
        const ns = freshNamespace();
        // The other client's PUT is acknowledged (v1) while the import runs; the import (policy skip) must leave it.
        let theirs: unknown;
        const raced = racedBy(importer, "app", async () => (theirs = await other.set(ns, "app", "theirs", sha("theirs"), 1)));
        const { results, succeeded } = await importEntries(raced, ns, [{ configId: "app", data: "archive" }, { configId: "new", data: "n" }], "skip", opts);
        expect(theirs).toEqual({ changed: true, version: 1 });
        expect(results.map((r) => [r.configId, r.outcome])).toEqual([["app", "skipped"], ["new", "created"]]);
        expect(succeeded).toBe(1);
        await expect.poll(async () => (await importer.get(ns, "app"))?.data, { timeout: 3000 }).toBe("theirs");
        expect(await importer.versions(ns, "app")).toEqual([]); // nothing was written over it
      } finally {
        await importer.close();
        if (other !== importer) await other.close();
      }
    });
  });
}

describeImportRace("embedded", async () => {
  const shared = createMemoryConfigStore({ maxVersions: 5 });
  return [shared, shared];
});
for (const t of redisTargets()) {
  const open = async () => createRedisConfigStore(await connectRedis(t.url), { maxVersions: 5 });
  describeImportRace(t.name, async () => Promise.all([open(), open()]), t.skip);
}
