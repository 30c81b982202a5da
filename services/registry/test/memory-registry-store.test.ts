import { describe, expect, it, vi } from "vitest";
import { createMemoryRegistryStore } from "../src/store/memory-registry-store.js";
import type { InstanceRecord } from "../src/store/registry-store.js";
import { describeRegistryStoreContract } from "./registry-store.contract.js";

const shared = createMemoryRegistryStore();
// Two "opens" of the embedded store are the same in-process data set; closing is a no-op for the shared one.
describeRegistryStoreContract("embedded", async () => ({ ...shared, close: async () => {} }));

/**
 * The embedded store keeps a service's sorted list between reads. Every write used to drop it, so the next `/lb` or
 * list sorted the whole service again: in a 100,000-instance service whose instances renew, nearly every `/lb` held the
 * event loop 45–130 ms. A write now changes the list in place.
 */
describe("embedded store: a large service's list across writes", () => {
  const NS = "{big-list}";
  const SERVICE = "big";
  const record = (k: number, now: number, ttlMs = 600_000, metadata: Record<string, string> = {}): InstanceRecord => {
    const host = `10.${(k >> 16) & 255}.${(k >> 8) & 255}.${k & 255}`;
    return { instanceId: `${SERVICE}@http#${host}#8080`, serviceId: SERVICE, schema: "http", host, port: 8080, weight: 1, isEphemeral: true, ttlAt: now + ttlMs, ttlMs, metadata };
  };
  /** Sorts of arrays of instance records made while `run` ran. */
  async function recordSortsIn(run: () => Promise<void>): Promise<number> {
    const sort = vi.spyOn(Array.prototype, "sort");
    try {
      await run();
      return sort.mock.contexts.filter((a) => Array.isArray(a) && (a as { instanceId?: unknown }[])[0]?.instanceId !== undefined).length;
    } finally {
      sort.mockRestore();
    }
  }

  it("renewing, registering, deregistering and setting metadata in a 20,000-instance service sort none of its reads again", async () => {
    const store = createMemoryRegistryStore();
    const now = Date.now();
    for (let k = 0; k < 20_000; k++) await store.register(NS, record(k, now), now);
    expect(await store.listInstances(NS, SERVICE, now)).toHaveLength(20_000); // the list is made (and sorted) once here
    const sorts = await recordSortsIn(async () => {
      for (let k = 0; k < 5; k++) {
        const at = now + 1 + k;
        await store.renew(NS, SERVICE, record(k * 997, now).instanceId, at);
        expect(await store.listInstances(NS, SERVICE, at)).toHaveLength(20_000);
        await store.setMetadata(NS, SERVICE, record(k * 991, now).instanceId, { zone: "a" }, at);
        expect(await store.listInstances(NS, SERVICE, at)).toHaveLength(20_000);
        await store.register(NS, record(30_000 + k, at), at);
        expect(await store.listInstances(NS, SERVICE, at)).toHaveLength(20_001);
        await store.deregister(NS, SERVICE, record(30_000 + k, at).instanceId, at);
        expect(await store.listInstances(NS, SERVICE, at)).toHaveLength(20_000);
      }
    });
    expect(sorts, "reads after single writes sorted the whole service again").toBe(0);
  });

  it("what a read answers after any mix of writes, expiries and sweeps is every live instance, sorted, as last written", async () => {
    const store = createMemoryRegistryStore();
    const start = Date.now();
    const model = new Map<string, InstanceRecord>();
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let step = 0; step < 3000; step++) {
      const at = start + step * 10;
      const k = rand(200);
      const id = record(k, at).instanceId;
      const op = rand(6);
      const isLive = (r?: InstanceRecord) => r !== undefined && (r.ttlAt === undefined || r.ttlAt > at);
      if (op <= 1) {
        const r = record(k, at, 50 + rand(400), { step: String(step) }); // short ttls: instances expire along the way
        await store.register(NS, r, at);
        model.set(id, r);
      } else if (op === 2) {
        const renewed = await store.renew(NS, SERVICE, id, at);
        expect(renewed !== undefined).toBe(isLive(model.get(id)));
        if (renewed) model.set(id, { ...model.get(id)!, ttlAt: renewed.ttlAt });
      } else if (op === 3) {
        expect(await store.deregister(NS, SERVICE, id, at)).toBe(isLive(model.get(id)));
        model.delete(id);
      } else if (op === 4) {
        const changed = await store.setMetadata(NS, SERVICE, id, { m: String(step) }, at);
        expect(changed).toBe(isLive(model.get(id)));
        if (changed) model.set(id, { ...model.get(id)!, metadata: { m: String(step) } });
      } else await store.sweep(NS, at);
      const expected = [...model.values()].filter(isLive).sort((a, b) => (a.instanceId < b.instanceId ? -1 : 1));
      expect(await store.listInstances(NS, SERVICE, at), `step ${step}`).toEqual(expected);
    }
  });
});
