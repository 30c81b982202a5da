import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NamespaceIndex } from "../src/namespace-index.js";

let seq = 0;
/** A fresh name per call: suites sharing one Redis never see each other's data. */
export const fresh = (label = "n") => `${label}-{ni${process.pid}x${Date.now().toString(36)}x${seq++}}`;

/**
 * What every NamespaceIndex adapter must do. `open(system)` creates an index on system namespace `system`; two opens
 * with the same system share data (two processes on one Redis; the embedded adapter returns the same instance).
 */
export function describeNamespaceIndexContract(name: string, open: (system: string) => Promise<NamespaceIndex>, skip = "") {
  describe.skipIf(skip)(`NamespaceIndex contract: ${name}`, () => {
    let system: string;
    let index: NamespaceIndex;
    beforeAll(async () => {
      system = fresh("gov");
      index = await open(system);
    });
    afterAll(async () => index?.close());

    it("the system namespace is indexed from the start and is the current namespace until one is set", async () => {
      expect(index.system).toBe(system);
      expect(await index.list()).toEqual([system]);
      expect(await index.count()).toBe(1);
      expect(await index.has(system)).toBe(true);
      expect(await index.current()).toBe(system);
    });

    it("add is idempotent, list is sorted, count follows", async () => {
      const [b, a] = [fresh("b"), fresh("a")];
      await index.add(b);
      await index.add(a);
      await index.add(b);
      expect(await index.list()).toEqual([a, b, system].sort());
      expect(await index.count()).toBe(3);
      expect(await index.remove(a)).toBe(true);
      expect(await index.remove(b)).toBe(true);
      expect(await index.list()).toEqual([system]);
    });

    it("create answers whether this call indexed the namespace: of concurrent creates on two indexes exactly one", async () => {
      const other = await open(system);
      try {
        const ns = fresh("c");
        const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? other : index).create(ns)));
        expect(answers.filter(Boolean)).toHaveLength(1);
        expect(await index.create(ns)).toBe(false);
        expect(await other.has(ns)).toBe(true);
        expect(await index.remove(ns)).toBe(true);
        expect(await other.create(ns)).toBe(true); // removed: creating it again is a creation
        await index.remove(ns);
      } finally {
        if (other !== index) await other.close();
      }
    });

    it("remove answers false for an unknown namespace and refuses the system namespace", async () => {
      expect(await index.remove(fresh())).toBe(false);
      await expect(index.remove(system)).rejects.toThrow(/system namespace.*cannot be deleted/);
      expect(await index.has(system)).toBe(true);
    });

    it("an add after a remove indexes the namespace again (the cache forgets removed names)", async () => {
      const ns = fresh();
      await index.add(ns);
      expect(await index.remove(ns)).toBe(true);
      expect(await index.has(ns)).toBe(false);
      await index.add(ns);
      expect(await index.has(ns)).toBe(true);
      await index.remove(ns);
    });

    it("setCurrent indexes the namespace and is seen by every index on the store; removing it makes the system namespace current", async () => {
      const other = await open(system);
      try {
        const ns = fresh();
        await index.setCurrent(ns);
        expect(await other.current()).toBe(ns);
        expect(await other.has(ns)).toBe(true);
        expect(await other.remove(ns)).toBe(true);
        expect(await index.current()).toBe(system);
        await index.setCurrent(system);
        expect(await other.current()).toBe(system);
      } finally {
        if (other !== index) await other.close();
      }
    });

    it("indexes on different system namespaces are independent", async () => {
      const elsewhere = await open(fresh("gov"));
      try {
        const ns = fresh();
        await index.add(ns);
        expect(await elsewhere.has(ns)).toBe(false);
        expect(await elsewhere.list()).toEqual([elsewhere.system]);
        await index.remove(ns);
      } finally {
        await elsewhere.close();
      }
    });
  });
}
