import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InstanceRecord, RegistryChange, RegistryStore } from "../src/store/registry-store.js";
import { watchInstances, type InstanceWatchEvent } from "../src/watch-instances.js";

let seq = 0;
/** A fresh namespace per test so suites sharing one Redis never see each other's data. */
export const freshNamespace = (label = "r") => `${label}-{r${process.pid}x${Date.now().toString(36)}x${seq++}}`;

const T0 = 1_700_000_000_000;

/** An ephemeral instance record (ttlAt = now + ttlMs), or a fixed one with `ttlMs: 0`. */
export function instance(serviceId: string, host: string, port: number, over: Partial<InstanceRecord> = {}, now = T0): InstanceRecord {
  const ttlMs = over.ttlMs ?? 60_000;
  const isEphemeral = over.isEphemeral ?? ttlMs > 0;
  return {
    instanceId: `${serviceId}@http#${host}#${port}`,
    serviceId,
    schema: "http",
    host,
    port,
    weight: 1,
    isEphemeral,
    ...(isEphemeral ? { ttlAt: now + ttlMs } : {}),
    ttlMs: isEphemeral ? ttlMs : 0,
    metadata: {},
    ...over,
  };
}

/** Collects a watch's events (read at the clock `now`). */
function collect(store: RegistryStore, ns: string, serviceId: string, now: () => number = Date.now) {
  const stop = new AbortController();
  const events: InstanceWatchEvent[] = [];
  const done = (async () => {
    for await (const e of watchInstances(store, ns, serviceId, stop.signal, now)) events.push(e);
  })();
  return {
    events,
    ops: () => events.map((e) => ("instances" in e ? `${e.op}:${e.instances.length}` : `${e.op}:${"instance" in e ? e.instance.instanceId : e.instanceId}`)),
    async close() {
      stop.abort();
      await done;
    },
  };
}

/**
 * Resolves once `follower` receives `writer`'s changes (a second Redis store's subscription is live), by writing probes
 * to a namespace of its own until one arrives: a condition, not a guess of how long a subscription takes.
 */
async function untilFollowing(writer: RegistryStore, follower: RegistryStore): Promise<void> {
  const probe = freshNamespace("probe");
  let seen = false;
  const unsubscribe = follower.subscribe((c) => void (c.namespace === probe && (seen = true)));
  try {
    for (let i = 0; !seen; i++) {
      await writer.putService(probe, `p${i}`);
      await expect.poll(() => seen, { timeout: 200, interval: 5 }).toBe(true).catch(() => undefined);
    }
  } finally {
    unsubscribe();
  }
}

/** A store whose listInstances calls are counted (the real store underneath: it counts, it does not fake). */
function countingReads(store: RegistryStore): { store: RegistryStore; reads: () => number } {
  let reads = 0;
  return {
    store: { ...store, listInstances: (...args) => (reads++, store.listInstances(...args)), getInstance: (...args) => (reads++, store.getInstance(...args)) },
    reads: () => reads,
  };
}

/**
 * The behaviour every RegistryStore adapter must show. Stores opened twice must share data (two processes on one
 * Redis; the embedded store returns the same instance).
 */
export function describeRegistryStoreContract(name: string, open: () => Promise<RegistryStore>, skip = "") {
  describe.skipIf(skip)(`RegistryStore contract: ${name}`, () => {
    let store: RegistryStore;
    beforeAll(async () => {
      store = await open();
    });
    afterAll(async () => {
      await store?.close();
    });

    it("put service: created once, then false; services list sorted; register creates its service", async () => {
      const ns = freshNamespace();
      expect(await store.listServices(ns)).toEqual([]);
      expect(await store.putService(ns, "payment")).toBe(true);
      expect(await store.putService(ns, "payment")).toBe(false);
      await store.register(ns, instance("order", "10.0.0.1", 8080), T0);
      expect(await store.listServices(ns)).toEqual(["order", "payment"]);
      expect(await store.listInstances(ns, "payment", T0)).toEqual([]);
      expect(await store.listInstances(ns, "unknown", T0)).toEqual([]);
    });

    it("service births: when each service was created (put or first register); a service deleted and created again is born again", async () => {
      const ns = freshNamespace();
      expect(await store.listServiceBirths(ns)).toEqual(new Map());
      await store.putService(ns, "payment", T0);
      await store.putService(ns, "payment", T0 + 5); // existed: its birth stays
      await store.register(ns, instance("order", "h", 1), T0 + 1);
      await store.register(ns, instance("order", "h", 2), T0 + 2);
      expect(await store.listServiceBirths(ns)).toEqual(new Map([["payment", T0], ["order", T0 + 1]]));
      expect(await store.deleteService(ns, "payment", T0 + 10)).toBe("removed");
      expect(await store.listServiceBirths(ns)).toEqual(new Map([["order", T0 + 1]]));
      await store.putService(ns, "payment", T0 + 20);
      expect((await store.listServiceBirths(ns)).get("payment")).toBe(T0 + 20);
      await store.deleteNamespace(ns);
      expect(await store.listServiceBirths(ns)).toEqual(new Map());
      await store.register(ns, instance("order", "h", 1, {}, T0 + 30), T0 + 30);
      expect(await store.listServiceBirths(ns)).toEqual(new Map([["order", T0 + 30]]));
    });

    it("register stores the record exactly; instances are listed sorted by id; get reads one", async () => {
      const ns = freshNamespace();
      const b = instance("order", "10.0.0.2", 8080, { weight: 5, metadata: { zone: "b", "é": "日本" }, ttlMs: 30_000 });
      const a = instance("order", "10.0.0.1", 9090, { ttlMs: 0, schema: "grpc", instanceId: "order@grpc#10.0.0.1#9090" });
      await store.register(ns, b, T0);
      await store.register(ns, a, T0);
      expect(await store.listInstances(ns, "order", T0)).toEqual([a, b]);
      expect(await store.getInstance(ns, "order", b.instanceId, T0)).toEqual(b);
      expect(await store.getInstance(ns, "order", "order@http#nope#1", T0)).toBeUndefined();
      expect(a.ttlAt).toBeUndefined();
      expect(b.ttlAt).toBe(T0 + 30_000);
    });

    it("every list read answers as of its own time: after each write, as ttls pass, for an earlier time; a caller's changes to it stay its own", async () => {
      const ns = freshNamespace();
      const a = instance("svc", "a", 1, { ttlMs: 1000 });
      const b = instance("svc", "b", 1, { ttlMs: 2000 });
      await store.register(ns, a, T0);
      const first = await store.listInstances(ns, "svc", T0);
      expect(first).toEqual([a]);
      first.pop(); // the caller's copy
      expect(await store.listInstances(ns, "svc", T0 + 1)).toEqual([a]);
      await store.register(ns, b, T0 + 2);
      expect(await store.listInstances(ns, "svc", T0 + 3)).toEqual([a, b]);
      expect(await store.listInstances(ns, "svc", T0 + 1000)).toEqual([b]); // a's ttl passed
      expect(await store.listInstances(ns, "svc", T0 + 999)).toEqual([a, b]); // reads clean nothing: earlier, a is live
      expect(await store.setMetadata(ns, "svc", b.instanceId, { z: "1" }, T0 + 4)).toBe(true);
      expect((await store.listInstances(ns, "svc", T0 + 5)).map((r) => r.metadata)).toEqual([{}, { z: "1" }]);
      expect(await store.renew(ns, "svc", a.instanceId, T0 + 600)).toEqual({ ttlAt: T0 + 1600 });
      expect((await store.listInstances(ns, "svc", T0 + 1500)).map((r) => r.instanceId)).toEqual([a.instanceId, b.instanceId]);
      expect(await store.deregister(ns, "svc", b.instanceId, T0 + 700)).toBe(true);
      expect(await store.listInstances(ns, "svc", T0 + 701)).toEqual([expect.objectContaining({ instanceId: a.instanceId })]);
      expect(await store.listInstances(ns, "svc", T0 + 1600)).toEqual([]);
    });

    it("re-register replaces the record and metadata, and switches ephemeral ↔ fixed", async () => {
      const ns = freshNamespace();
      const eph = instance("svc", "h", 1, { metadata: { a: "1", b: "2" }, ttlMs: 1000 });
      await store.register(ns, eph, T0);
      const fixed = instance("svc", "h", 1, { ttlMs: 0, metadata: { c: "3" }, weight: 7 });
      await store.register(ns, fixed, T0 + 500);
      // long after the old ttl: a fixed instance never expires
      expect(await store.listInstances(ns, "svc", T0 + 10 ** 9)).toEqual([fixed]);
      expect(await store.stats(ns, T0 + 10 ** 9)).toEqual([{ serviceId: "svc", instanceCount: 1 }]);
      const eph2 = instance("svc", "h", 1, { ttlMs: 2000 }, T0 + 600);
      await store.register(ns, eph2, T0 + 600);
      expect(await store.getInstance(ns, "svc", eph2.instanceId, T0 + 2599)).toEqual(eph2);
      expect(await store.getInstance(ns, "svc", eph2.instanceId, T0 + 2600)).toBeUndefined();
    });

    it("expired instances never appear in any read, and every write treats them as gone", async () => {
      const ns = freshNamespace();
      const r = instance("svc", "h", 1, { ttlMs: 1000 });
      await store.register(ns, r, T0);
      const at = T0 + 1000; // ttlAt itself is expired
      expect(await store.listInstances(ns, "svc", at - 1)).toEqual([r]);
      expect(await store.listInstances(ns, "svc", at)).toEqual([]);
      expect(await store.getInstance(ns, "svc", r.instanceId, at)).toBeUndefined();
      expect(await store.stats(ns, at)).toEqual([{ serviceId: "svc", instanceCount: 0 }]);
      expect(await store.renew(ns, "svc", r.instanceId, at)).toBeUndefined();
      expect(await store.setMetadata(ns, "svc", r.instanceId, { a: "b" }, at)).toBe(false);
      expect(await store.deregister(ns, "svc", r.instanceId, at)).toBe(false);
      // cleaned, not merely hidden: at an earlier time it is gone too
      expect(await store.listInstances(ns, "svc", T0)).toEqual([]);
    });

    it("renew extends by the instance's ttl; unknown → undefined; fixed → no expiry", async () => {
      const ns = freshNamespace();
      const r = instance("svc", "h", 1, { ttlMs: 1000 });
      await store.register(ns, r, T0);
      expect(await store.renew(ns, "svc", r.instanceId, T0 + 900)).toEqual({ ttlAt: T0 + 1900 });
      expect(await store.getInstance(ns, "svc", r.instanceId, T0 + 1899)).toMatchObject({ ttlAt: T0 + 1900 });
      expect(await store.renew(ns, "svc", "svc@http#x#1", T0)).toBeUndefined();
      const f = instance("svc", "f", 2, { ttlMs: 0 });
      await store.register(ns, f, T0);
      expect(await store.renew(ns, "svc", f.instanceId, T0)).toEqual({});
      expect(await store.getInstance(ns, "svc", f.instanceId, T0 + 10 ** 9)).toEqual(f);
    });

    it("set metadata replaces the whole map; {} clears it; unknown → false", async () => {
      const ns = freshNamespace();
      const r = instance("svc", "h", 1, { metadata: { a: "1", b: "2" } });
      await store.register(ns, r, T0);
      expect(await store.setMetadata(ns, "svc", r.instanceId, { c: "3" }, T0)).toBe(true);
      expect((await store.getInstance(ns, "svc", r.instanceId, T0))?.metadata).toEqual({ c: "3" });
      expect(await store.setMetadata(ns, "svc", r.instanceId, {}, T0)).toBe(true);
      expect((await store.getInstance(ns, "svc", r.instanceId, T0))?.metadata).toEqual({});
      expect((await store.getInstance(ns, "svc", r.instanceId, T0))?.ttlAt).toBe(r.ttlAt);
      expect(await store.setMetadata(ns, "svc", "svc@http#x#1", { a: "b" }, T0)).toBe(false);
    });

    it("deregister removes the instance; a second time → false", async () => {
      const ns = freshNamespace();
      const r = instance("svc", "h", 1);
      await store.register(ns, r, T0);
      expect(await store.deregister(ns, "svc", r.instanceId, T0)).toBe(true);
      expect(await store.deregister(ns, "svc", r.instanceId, T0)).toBe(false);
      expect(await store.listInstances(ns, "svc", T0)).toEqual([]);
      expect(await store.listServices(ns)).toEqual(["svc"]); // the service stays
    });

    it("delete service: unknown → not_found; refused while live instances remain; allowed once they expired", async () => {
      const ns = freshNamespace();
      expect(await store.deleteService(ns, "svc", T0)).toBe("not_found");
      await store.register(ns, instance("svc", "h", 1, { ttlMs: 1000 }), T0);
      expect(await store.deleteService(ns, "svc", T0 + 999)).toBe("has_instances");
      expect(await store.listServices(ns)).toEqual(["svc"]);
      expect(await store.deleteService(ns, "svc", T0 + 1000)).toBe("removed");
      expect(await store.listServices(ns)).toEqual([]);
      expect(await store.listInstances(ns, "svc", T0)).toEqual([]); // leftovers are gone with it
      await store.register(ns, instance("fixed", "h", 1, { ttlMs: 0 }), T0);
      expect(await store.deleteService(ns, "fixed", T0 + 10 ** 9)).toBe("has_instances");
    });

    it("stats count the live instances of every service, sorted", async () => {
      const ns = freshNamespace();
      await store.putService(ns, "empty");
      await store.register(ns, instance("b", "h", 1, { ttlMs: 1000 }), T0);
      await store.register(ns, instance("b", "h", 2, { ttlMs: 0 }), T0);
      await store.register(ns, instance("a", "h", 1, { ttlMs: 5000 }), T0);
      expect(await store.stats(ns, T0)).toEqual([
        { serviceId: "a", instanceCount: 1 },
        { serviceId: "b", instanceCount: 2 },
        { serviceId: "empty", instanceCount: 0 },
      ]);
      expect((await store.stats(ns, T0 + 1000)).map((s) => s.instanceCount)).toEqual([1, 1, 0]);
    });

    it("swept stats: the live counts of the last sweep, every service listed; a deleted service leaves no count", async () => {
      const ns = freshNamespace();
      await store.putService(ns, "empty");
      await store.register(ns, instance("b", "h", 1, { ttlMs: 1000 }), T0);
      await store.register(ns, instance("b", "h", 2, { ttlMs: 0 }), T0);
      await store.register(ns, instance("a", "h", 1, { ttlMs: 5000 }), T0);
      expect((await store.sweptStats(ns)).map((s) => s.instanceCount)).toEqual([0, 0, 0]); // never swept
      await store.sweep(ns, T0);
      expect(await store.sweptStats(ns)).toEqual([
        { serviceId: "a", instanceCount: 1 },
        { serviceId: "b", instanceCount: 2 },
        { serviceId: "empty", instanceCount: 0 },
      ]);
      await store.sweep(ns, T0 + 1000); // b@h#1 expired
      expect((await store.sweptStats(ns)).map((s) => s.instanceCount)).toEqual([1, 1, 0]);
      expect(await store.deleteService(ns, "empty", T0 + 1000)).toBe("removed");
      await store.putService(ns, "empty");
      expect(await store.sweptStats(ns)).toContainEqual({ serviceId: "empty", instanceCount: 0 });
      expect(await store.sweptStats(freshNamespace())).toEqual([]);
    });

    it("sweep drops every expired instance of the namespace, announcing each", async () => {
      const ns = freshNamespace();
      const other = await open();
      const seen: RegistryChange[] = [];
      const unsubscribe = other.subscribe((c) => c.namespace === ns && c.op === "expired" && seen.push(c));
      try {
        await untilFollowing(store, other);
        await store.register(ns, instance("a", "h", 1, { ttlMs: 1000 }), T0);
        await store.register(ns, instance("b", "h", 1, { ttlMs: 1000 }), T0);
        await store.register(ns, instance("b", "h", 2, { ttlMs: 5000 }), T0);
        // a sweeper that lost the stats mutex while it read the service list sends nothing
        let asked = 0;
        expect(await store.sweep(ns, T0 + 1000, () => (asked++, false))).toBe(0);
        expect(asked).toBe(1);
        expect(await store.sweep(ns, T0 + 1000, () => true)).toBe(2);
        expect(await store.sweep(ns, T0 + 1000)).toBe(0);
        expect((await store.listInstances(ns, "b", T0)).map((r) => r.port)).toEqual([2]);
        await expect.poll(() => seen.length, { timeout: 3000 }).toBe(2);
        expect(seen.map((c) => c.instanceId).sort()).toEqual(["a@http#h#1", "b@http#h#1"]);
      } finally {
        unsubscribe();
        if (other !== store) await other.close();
      }
    });

    it("publishes every change to subscribers, including those of a second store; renewals only past half the ttl", async () => {
      const ns = freshNamespace();
      const other = await open();
      const seen: string[] = [];
      const unsubscribe = other.subscribe((c) => c.namespace === ns && seen.push(`${c.op} ${c.serviceId} ${c.instanceId ?? ""}`.trim()));
      try {
        await untilFollowing(store, other);
        const r = instance("svc", "h", 1, { ttlMs: 1000 });
        await store.register(ns, r, T0);
        await store.renew(ns, "svc", r.instanceId, T0 + 100); // 900 ms of 1000 left: not published
        await store.renew(ns, "svc", r.instanceId, T0 + 700); // 400 ms left: published
        await store.setMetadata(ns, "svc", r.instanceId, { a: "1" }, T0 + 700);
        await store.deregister(ns, "svc", r.instanceId, T0 + 700);
        await store.register(ns, instance("svc", "h", 2, { ttlMs: 1000 }), T0);
        await store.register(ns, instance("svc", "h", 3, { ttlMs: 1000 }, T0 + 5000), T0 + 5000); // drops h#2 on its way: expired
        await store.deregister(ns, "svc", "svc@http#h#3", T0 + 5000);
        expect(await store.deleteService(ns, "svc", T0 + 5000)).toBe("removed");
        const expected = [
          "service_add svc",
          `register svc ${r.instanceId}`,
          `renew svc ${r.instanceId}`,
          `metadata svc ${r.instanceId}`,
          `deregister svc ${r.instanceId}`,
          "register svc svc@http#h#2",
          "expired svc svc@http#h#2",
          "register svc svc@http#h#3",
          "deregister svc svc@http#h#3",
          "service_remove svc",
        ];
        await expect.poll(() => seen.length, { timeout: 3000 }).toBe(expected.length);
        expect(seen).toEqual(expected);
      } finally {
        unsubscribe();
        if (other !== store) await other.close();
      }
    });

    it("service ids with ':', '/', spaces and unicode, and namespaces that share a hash tag, stay distinct", async () => {
      const tag = freshNamespace("x").replace(/^x-/, "");
      const a = tag;
      const b = `cosky-${tag}`;
      for (const id of ["a:b", "dir/svc", "with space", "服务"]) await store.register(a, instance(id, "h", 1), T0);
      await store.register(b, instance("a:b", "other", 2), T0);
      expect(await store.listServices(a)).toEqual(["a:b", "dir/svc", "with space", "服务"].sort());
      expect(await store.listServices(b)).toEqual(["a:b"]);
      expect((await store.listInstances(a, "a:b", T0)).map((r) => r.host)).toEqual(["h"]);
      expect((await store.listInstances(b, "a:b", T0)).map((r) => r.host)).toEqual(["other"]);
    });

    it("an instance lives while renewed, past many ttls, and is gone exactly one ttl after its last renewal", async () => {
      const ns = freshNamespace();
      const r = instance("svc", "h", 1, { ttlMs: 1000 });
      await store.register(ns, r, T0);
      // The caller's clock: renewals 900 ms apart (less than half the ttl left before each, so each is published)
      // for ten ttls; a busy machine cannot make it miss one.
      let at = T0;
      for (let i = 0; i < 11; i++) {
        at += 900;
        expect(await store.renew(ns, "svc", r.instanceId, at)).toEqual({ ttlAt: at + 1000 });
        expect((await store.listInstances(ns, "svc", at)).map((x) => x.instanceId)).toEqual([r.instanceId]);
      }
      expect((await store.listInstances(ns, "svc", at + 999)).map((x) => x.instanceId)).toEqual([r.instanceId]);
      expect(await store.listInstances(ns, "svc", at + 1000)).toEqual([]);
      expect(await store.renew(ns, "svc", r.instanceId, at + 1000)).toBeUndefined();
    });

    it("a watch delivers register, metadata, deregister and expiry within 1 s, from another store's writes", async () => {
      const ns = freshNamespace();
      const writer = await open();
      await store.register(ns, instance("svc", "old", 1, { ttlMs: 0 }), Date.now());
      const w = collect(store, ns, "svc");
      try {
        await expect.poll(() => w.ops(), { timeout: 1000 }).toEqual(["current:1"]);
        await untilFollowing(writer, store);
        const at = Date.now();
        const eph = instance("svc", "eph", 2, { ttlMs: 1000 }, at);
        await writer.register(ns, eph, at);
        await expect.poll(() => w.ops(), { timeout: 1000, interval: 10 }).toContain(`register:${eph.instanceId}`);
        await writer.setMetadata(ns, "svc", "svc@http#old#1", { zone: "a" }, Date.now());
        await expect.poll(() => w.ops(), { timeout: 1000, interval: 10 }).toContain("metadata:svc@http#old#1");
        const meta = w.events.find((e) => e.op === "metadata");
        expect(meta && "instance" in meta && meta.instance.metadata).toEqual({ zone: "a" });
        await writer.deregister(ns, "svc", "svc@http#old#1", Date.now());
        await expect.poll(() => w.ops(), { timeout: 1000, interval: 10 }).toContain("deregister:svc@http#old#1");
        // nobody writes: the watch itself notices the ttl passing
        await expect.poll(() => w.ops(), { timeout: 2500, interval: 10 }).toContain(`expired:${eph.instanceId}`);
        expect(Date.now() - (at + 1000)).toBeLessThan(1000);
        expect(w.ops()).toEqual(["current:1", `register:${eph.instanceId}`, "metadata:svc@http#old#1", "deregister:svc@http#old#1", `expired:${eph.instanceId}`]);
      } finally {
        await w.close();
        if (writer !== store) await writer.close();
      }
    });

    it("a watch keeps an instance that is renewed without a published renewal, sends its new ttl once the old one passed, and does not report it expired", async () => {
      const ns = freshNamespace();
      // The watch's clock is the test's: only the watch's own timer (set from that clock) runs in real time.
      let now = T0;
      const r = instance("svc", "h", 1, { ttlMs: 100 }, T0);
      await store.register(ns, r, T0);
      const counted = countingReads(store);
      const w = collect(counted.store, ns, "svc", () => now);
      try {
        await expect.poll(() => w.ops(), { timeout: 1000 }).toEqual(["current:1"]);
        now = T0 + 40;
        expect(await store.renew(ns, "svc", r.instanceId, now)).toEqual({ ttlAt: T0 + 140 }); // 60 of 100 ms left: not published
        // Past the ttl it knew, the watch reads the instance again, finds the renewal and sends it with its new ttl.
        now = T0 + 120;
        await expect.poll(() => w.ops(), { timeout: 5000, interval: 5 }).toEqual(["current:1", `renew:${r.instanceId}`]);
        expect(counted.reads()).toBeGreaterThanOrEqual(2);
        // Once the renewed ttl has passed too, the next re-read reports the expiry.
        now = T0 + 140;
        await expect.poll(() => w.ops(), { timeout: 5000, interval: 5 }).toEqual(["current:1", `renew:${r.instanceId}`, `expired:${r.instanceId}`]);
      } finally {
        await w.close();
      }
    });

    it("countServices: the namespace's services, without scanning", async () => {
      const ns = freshNamespace();
      expect(await store.countServices(ns)).toBe(0);
      await store.putService(ns, "a");
      await store.register(ns, instance("b", "h", 1), T0);
      expect(await store.countServices(ns)).toBe(2);
    });

    it("deleteNamespace removes every service, instance and count; a namespace sharing the hash tag keeps its own", async () => {
      const ns = freshNamespace();
      const sibling = `cosky-${ns.slice(ns.indexOf("{"))}`;
      await store.register(sibling, instance("keep", "h", 1), T0);
      await store.putService(ns, "empty");
      await store.register(ns, instance("a", "h", 1), T0);
      await store.register(ns, instance("a", "h", 2, { ttlMs: 0 }), T0);
      await store.register(ns, instance("b", "h", 1, { ttlMs: 1000 }), T0);
      await store.sweep(ns, T0);
      // read first: a store with a read cache must forget it at once, not when the removals' events arrive
      expect(await store.listInstances(ns, "a", T0)).toHaveLength(2);
      expect(await store.deleteNamespace(ns)).toEqual({ services: 3, instances: 3 });
      expect(await store.listServices(ns)).toEqual([]);
      expect(await store.countServices(ns)).toBe(0);
      expect(await store.listInstances(ns, "a", T0)).toEqual([]);
      expect(await store.sweptStats(ns)).toEqual([]);
      expect(await store.deleteNamespace(ns)).toEqual({ services: 0, instances: 0 });
      expect(await store.listServices(sibling)).toEqual(["keep"]);
      // re-created afterwards: nothing of the old data comes back
      await store.putService(ns, "a");
      expect(await store.listInstances(ns, "a", T0)).toEqual([]);
      expect(await store.sweptStats(ns)).toEqual([{ serviceId: "a", instanceCount: 0 }]);
    });

    it("deleteNamespace onlyIfEmpty: refused (undefined, nothing removed) while a service exists", async () => {
      const ns = freshNamespace();
      await store.register(ns, instance("a", "h", 1, { ttlMs: 0 }), T0);
      expect(await store.deleteNamespace(ns, { onlyIfEmpty: true })).toBeUndefined();
      expect((await store.listInstances(ns, "a", T0)).map((r) => r.instanceId)).toEqual(["a@http#h#1"]);
      expect(await store.deregister(ns, "a", "a@http#h#1", T0)).toBe(true);
      expect(await store.deleteService(ns, "a", T0)).toBe("removed");
      expect(await store.deleteNamespace(ns, { onlyIfEmpty: true })).toEqual({ services: 0, instances: 0 });
    });

    it("deleteNamespace is announced: a watch of another store sees its instances go", async () => {
      const ns = freshNamespace();
      const other = await open();
      const seen: string[] = [];
      const unsubscribe = other.subscribe((c) => c.namespace === ns && (c.op === "deregister" || c.op === "service_remove") && seen.push(`${c.op} ${c.serviceId} ${c.instanceId ?? ""}`.trim()));
      await store.register(ns, instance("svc", "h", 1, { ttlMs: 0 }), Date.now());
      const w = collect(other, ns, "svc");
      try {
        await expect.poll(() => w.ops(), { timeout: 1000 }).toEqual(["current:1"]);
        await store.deleteNamespace(ns);
        await expect.poll(() => w.ops(), { timeout: 2000, interval: 10 }).toEqual(["current:1", "deregister:svc@http#h#1"]);
        await expect.poll(() => seen, { timeout: 2000, interval: 10 }).toEqual(["deregister svc svc@http#h#1", "service_remove svc"]);
      } finally {
        unsubscribe();
        await w.close();
        if (other !== store) await other.close();
      }
    });
  });
}
