// With gov.namespace.require-hash-tag=false, a config written into the namespace "current" was stored and indexed:
// GET /v1/namespaces listed "current", and DELETE /v1/namespaces/current (the current-namespace route's name, refused
// by the namespace service) could never remove it. Writes into it are refused; what is stored there is still read.
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createConfigService } from "../src/config-service.js";
import { createMemoryConfigStore } from "../src/store/memory-config-store.js";
import { rawZip } from "../../../gateway/test/zip-fixtures.js";

const LIMITS = { maxContentBytes: 1024 * 1024, maxZipBytes: 16 << 20, maxZipEntries: 1000, maxZipUncompressedBytes: 64 << 20 };

describe('the namespace "current" with require-hash-tag=false', () => {
  it("refuses config writes and imports into it (invalid_argument) and indexes nothing", async () => {
    const store = createMemoryConfigStore({ maxVersions: 10 });
    const indexed: string[] = [];
    const service = createConfigService({ store, namespaceRule: { requireHashTag: false }, limits: LIMITS, namespaces: { add: async (ns) => void indexed.push(ns) } });
    const ctx = { signal: new AbortController().signal } as never;
    const refused = async (call: Promise<unknown>) => {
      const err = await call.then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.InvalidArgument);
      expect((err as ConnectError).rawMessage).toContain('"current" cannot name a namespace');
    };
    await refused(service.setConfig({ namespace: "current", configId: "app.yaml", data: "x" } as never, ctx) as Promise<unknown>);
    await refused(service.importConfigs({ namespace: "current", policy: "skip", importZip: rawZip([{ name: "a.yaml", data: "a" }]) } as never, ctx) as Promise<unknown>);
    expect(indexed).toEqual([]);
    expect(await store.list("current")).toEqual([]);
    // what an earlier release stored there can still be read (and so moved and deleted)
    await store.set("current", "old.yaml", "o", "h", 1);
    expect(((await service.listConfigs({ namespace: "current" } as never, ctx)) as { configIds: string[] }).configIds).toEqual(["old.yaml"]);
  });
});
