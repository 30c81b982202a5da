import { Code, ConnectError } from "@connectrpc/connect";
import { createMemoryConfigStore, createRedisConfigStore, type ConfigStore } from "@gov/config-service";
import { createMemoryNamespaceIndex, createRedisNamespaceIndex } from "@gov/namespaces";
import { connectRedis } from "@gov/redis";
import { createMemoryRegistryStore } from "@gov/registry-service";
import JSZip from "jszip";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespaceService } from "../src/namespaces/namespace-service.js";
import { clientsOf, createNamespaceProcess, namespaceTargets, ns, type NamespaceProcess } from "./namespace-harness.js";

/**
 * A namespace holding data is listed, whatever a delete raced with: writes that land after a (forced) delete removed
 * the data are kept, and their namespace must stay in the index, or nothing lists them (nor counts them in a stat).
 */
// On Redis every write of the import waits for the store, so a delete from another client lands between two of them.
// (The embedded store answers at once: in one process with its client, the delete only gets the import's rare turns.)
for (const target of namespaceTargets().filter((t) => t.name === "redis")) {
  describe.skipIf(target.skip)(`namespace delete racing writes, ${target.name} store`, () => {
    let p: NamespaceProcess;
    let clients: ReturnType<typeof clientsOf>;
    beforeAll(async () => {
      p = await createNamespaceProcess(target.env);
      clients = clientsOf(await p.listen());
    });
    afterAll(async () => p?.close());

    it("an import that a forced delete cuts in two: the entries written after it are listed again", async () => {
      const zip = new JSZip();
      for (let i = 0; i < 1000; i++) zip.file(`c${i}.yaml`, `n: ${i}\n${"x".repeat(2_000)}\n`); // some work per entry: the delete lands mid-way
      const archive = await zip.generateAsync({ type: "uint8array", compression: "DEFLATE" });
      // The delete must land while the import still writes: a namespace written to without pause answers "aborted: it
      // kept changing" (each pass found new ids), its documented answer, so it is asked again until it lands — during
      // the import, or only once the import is over (a round that proves nothing). Rounds run until two have cut it.
      let cuts = 0;
      for (let round = 0; round < 8 && cuts < 2; round++) {
        const n = ns("imp-");
        let done = false;
        const importing = clients.configs.importConfigs({ namespace: n, importZip: archive, policy: "overwrite" }).finally(() => (done = true));
        // once the import is writing, the namespace is deleted under it
        while (!done && (await clients.configs.listConfigs({ namespace: n })).configIds.length === 0) await new Promise((r) => setImmediate(r));
        let landedDuringImport = false;
        for (let attempt = 0; ; attempt++) {
          const during = !done;
          const err = await clients.namespaces.deleteNamespace({ namespace: n, force: true }).then(() => undefined, (e: unknown) => ConnectError.from(e));
          if (err === undefined) {
            landedDuringImport = during && !done;
            break;
          }
          if (err.code !== Code.Aborted || (done && attempt >= 20)) throw err;
        }
        await importing;
        if (!landedDuringImport) continue;
        cuts++;
        const left = (await clients.configs.listConfigs({ namespace: n })).configIds.length;
        expect(left, "the delete landed part way through the import").toBeGreaterThan(0);
        expect(left).toBeLessThan(1000);
        expect((await clients.namespaces.listNamespaces({})).namespaces).toContain(n);
      }
      expect(cuts, "rounds whose delete landed while the import was writing").toBe(2);
    });
  });
}

describe("namespace delete: a write that landed after the data was deleted keeps its namespace listed", () => {
  // Another process's write: indexed there while its index cache still knew the name (it had not heard of the removal
  // yet), and stored after this delete removed the namespace's data. Played here by writing to the store right after
  // the delete's own data removal.
  const stores: { name: string; skip: string; open: () => Promise<{ configs: ConfigStore; index: ReturnType<typeof createMemoryNamespaceIndex>; close: () => Promise<void> }> }[] = [
    {
      name: "embedded",
      skip: "",
      open: async () => ({ configs: createMemoryConfigStore({ maxVersions: 10 }), index: createMemoryNamespaceIndex("gov-{sys-race}"), close: async () => {} }),
    },
    ...namespaceTargets()
      .filter((t) => t.name === "redis")
      .map((t) => ({
        name: t.name,
        skip: t.skip,
        open: async () => {
          const configs = await createRedisConfigStore(await connectRedis(t.env.REDIS_URL), { maxVersions: 10 });
          const index = await createRedisNamespaceIndex(await connectRedis(t.env.REDIS_URL), { system: `gov-{sys-race${process.pid}}` });
          return { configs, index, close: async () => void (await Promise.all([configs.close(), index.close()])) };
        },
      })),
  ];
  for (const s of stores) {
    it.skipIf(s.skip)(`on the ${s.name} store`, async () => {
      const { configs, index, close } = await s.open();
      try {
        const n = ns("late-");
        await index.add(n);
        await configs.set(n, "early.yaml", "a", "h-a", Date.now());
        const service = createNamespaceService({
          index,
          configs: {
            count: (x) => configs.count(x),
            deleteNamespace: async (x, o) => {
              const removed = await configs.deleteNamespace(x, o);
              await configs.set(x, "late.yaml", "b", "h-b", Date.now()); // the other process's late write
              return removed;
            },
          },
          registry: createMemoryRegistryStore(),
          namespaceRule: { requireHashTag: true },
        });
        expect(await service.deleteNamespace({ namespace: n, force: true } as never, {} as never)).toMatchObject({ removed: true, configs: 1 });
        expect(await configs.list(n)).toEqual(["late.yaml"]);
        expect(await index.list()).toContain(n);
      } finally {
        await close();
      }
    });
  }
});

describe("namespace delete cut short", () => {
  // Redis stopped answering mid-delete (a pause past the command timeout: 504 "may or may not have been applied"), or
  // the namespace kept changing (409): part of its data is still stored, and it must still be listed — also when the
  // outage outlasts the delete, so that nothing can be written to the index after the failure (the index is written
  // last, once the data is gone).
  const failures = [
    new ConnectError('the deletion of the configs of namespace "x" was sent to Redis but got no answer (Command timed out), so it may or may not have been applied', Code.DeadlineExceeded),
    new ConnectError('namespace "x" kept changing while its configs were being deleted: stop writing to it, then retry', Code.Aborted),
  ];
  for (const [failure, indexDown] of failures.flatMap((f) => [[f, false], [f, true]] as const)) {
    it(`keeps what is left listed (${Code[failure.code]}${indexDown ? ", the index unreachable from then on" : ""}), and a retried delete then removes it`, async () => {
      const configs = createMemoryConfigStore({ maxVersions: 10 });
      const memoryIndex = createMemoryNamespaceIndex("gov-{sys-cut}");
      let down = false;
      const outage = () => Promise.reject(new Error("Redis is unreachable"));
      const index = { ...memoryIndex, add: (x: string) => (down ? outage() : memoryIndex.add(x)), remove: (x: string) => (down ? outage() : memoryIndex.remove(x)) };
      const n = ns("cut-");
      await index.add(n);
      for (let i = 0; i < 4; i++) await configs.set(n, `c${i}.yaml`, "a", "h-a", Date.now());
      let fail = true;
      const service = createNamespaceService({
        index,
        configs: {
          count: (x) => configs.count(x),
          deleteNamespace: async (x, o) => {
            if (!fail) return configs.deleteNamespace(x, o);
            await configs.remove(x, "c0.yaml", Date.now()); // the first part went, then no answer
            await configs.remove(x, "c1.yaml", Date.now());
            down = indexDown;
            throw failure;
          },
        },
        registry: createMemoryRegistryStore(),
        namespaceRule: { requireHashTag: true },
      });
      const err = await Promise.resolve(service.deleteNamespace({ namespace: n, force: true } as never, {} as never)).then(() => undefined, (e: unknown) => ConnectError.from(e));
      expect(err?.code).toBe(failure.code);
      expect(await configs.list(n)).toEqual(["c2.yaml", "c3.yaml"]);
      expect(await index.list()).toContain(n); // listed: counted, swept, and deletable again
      fail = false;
      down = false;
      expect(await service.deleteNamespace({ namespace: n, force: true } as never, {} as never)).toMatchObject({ removed: true });
      expect(await index.list()).not.toContain(n);
      expect(await configs.list(n)).toEqual([]);
    });
  }
});
