import { connectRedis, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import diagnostics_channel from "node:diagnostics_channel";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ClockTooManyBackwardsException,
  machineKeys,
  MachineIdOverflowException,
  MachineLease,
  redisMachineIdDistributor,
  SnowflakeId,
  parseSnowflake,
  MachineIdLostException,
} from "../src/index.js";
import { captureLogs, redisLeases, uniqueNamespace } from "./helpers.js";

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`redis machine-id distributor on ${target.name}`, () => {
    let client: RedisClient;
    beforeAll(async () => {
      client = await connectRedis(target.url);
    });
    afterAll(() => client?.disconnect());

    const lease = redisLeases(() => client, 2);

    it("hands out distinct ids and overflows when all are held", async () => {
      const ns = uniqueNamespace("lease");
      const leases = await Promise.all(["a", "b", "c", "d"].map((i) => lease(ns, i)));
      expect(new Set(leases.map((l) => l.machineId))).toEqual(new Set([0, 1, 2, 3]));
      await expect(lease(ns, "e")).rejects.toBeInstanceOf(MachineIdOverflowException);
      // every key carries the {namespace} hash tag (so the whole set lives in one cluster slot)
      expect(Object.values(machineKeys(ns)).every((k) => k.includes(`{${ns}}`))).toBe(true);
      expect(await client.hlen(machineKeys(ns).itcIdx)).toBe(4);
    });

    it("never gives a second live process with the same instance id the first one's machine id (two containers, both 172.17.0.2:1)", async () => {
      const ns = uniqueNamespace("same-instance");
      const logs = captureLogs();
      const first = await lease(ns, "172.17.0.2:1");
      const second = await lease(ns, "172.17.0.2:1", { logger: logs.logger });
      expect(second.machineId).not.toBe(first.machineId);
      expect(logs.lines.filter((l) => l.msg.startsWith("Instance id [172.17.0.2:1] is held by a live lease of another process: this one leases machine id"))).toHaveLength(1);
      // both renew their own lease, and their generators' ids never meet
      await Promise.all([first.renew(), second.renew()]);
      expect([first.state().status, second.state().status]).toEqual(["UP", "UP"]);
      const ids = new Set<bigint>();
      for (const l of [first, second]) {
        const g = new SnowflakeId({ machine: l, layout: { machineBit: 2 }, logger: logs.logger });
        for (let i = 0; i < 5_000; i++) ids.add(g.nextId());
      }
      expect(ids.size).toBe(10_000);
      // each releases its own id, not the other's
      await second.revert();
      await first.renew();
      expect(first.state().status).toBe("UP");
      await first.revert();
      expect(new Set(Object.keys(await client.hgetall(machineKeys(ns).revert)).map(Number))).toEqual(new Set([first.machineId, second.machineId]));
      expect(await client.hlen(machineKeys(ns).itcIdx)).toBe(0);
      expect(await client.hlen(machineKeys(ns).owner)).toBe(0);
    });

    it("a restarted instance (its old lease never released) gets a new id while the old lease may be live, and its own back once it is stale", async () => {
      const ns = uniqueNamespace("restart");
      const crashed = await lease(ns, "a", { safeGuardMs: 300 }); // killed: never renewed nor released
      const soon = await lease(ns, "a", { safeGuardMs: 300 });
      expect(soon.machineId).not.toBe(crashed.machineId);
      await soon.revert();
      await new Promise((r) => setTimeout(r, 350)); // the crashed one's lease is older than T now: its owner has stopped
      const later = await lease(ns, "a", { safeGuardMs: 300 });
      expect(later.machineId).toBe(crashed.machineId);
      await crashed.renew();
      expect(crashed.state().status).toBe("LOST"); // had it still run, its renewal finds the entry another owner's
    });

    it("reuses a reverted id and hands its last timestamp to the next owner", async () => {
      const ns = uniqueNamespace("revert");
      const a = await lease(ns, "a");
      const b = await lease(ns, "b");
      await a.revert();
      expect(a.state().status).toBe("REVERTED");
      expect(await client.hexists(machineKeys(ns).revert, String(a.machineId))).toBe(1);
      const c = await lease(ns, "c");
      expect(c.machineId).toBe(a.machineId);
      expect(c.machineId).not.toBe(b.machineId);
      expect(await client.hlen(machineKeys(ns).revert)).toBe(0);
    });

    it("passes over an id released by a host whose clock ran ahead while a usable one is free; hands it out only when nothing else is left", async () => {
      const ns = uniqueNamespace("ahead");
      const ahead = await lease(ns, "fast-host", { clock: { now: () => Date.now() + 20_000 } });
      await ahead.revert(); // released with a last timestamp 20 s ahead of everyone else's clock
      // every newcomer starts (before, each took it first, refused to start on it, and gave it back for the next one)
      const others = [await lease(ns, "b"), await lease(ns, "c"), await lease(ns, "d")];
      expect(others.map((l) => l.machineId)).not.toContain(ahead.machineId);
      // the last id left: taken, and refused as before (a clock 20 s behind its last owner's cannot wait that long)
      await expect(lease(ns, "e", { logger: captureLogs().logger })).rejects.toBeInstanceOf(ClockTooManyBackwardsException);
      expect(await client.hexists(machineKeys(ns).revert, String(ahead.machineId))).toBe(1); // back in the pool
    });

    it("recycles an id not renewed for the safe-guard duration; the old holder's guard then reports it lost", async () => {
      const ns = uniqueNamespace("recycle");
      const logs = captureLogs();
      const held = await Promise.all(["a", "b", "c", "d"].map((i) => lease(ns, i, { safeGuardMs: 300, logger: logs.logger })));
      await expect(lease(ns, "e", { safeGuardMs: 300 })).rejects.toBeInstanceOf(MachineIdOverflowException);
      await new Promise((r) => setTimeout(r, 150));
      await Promise.all(held.slice(1).map((l) => l.renew())); // a stops renewing
      await new Promise((r) => setTimeout(r, 200));
      const e = await lease(ns, "e", { safeGuardMs: 300 });
      expect(e.machineId).toBe(held[0].machineId);
      await held[0].renew();
      expect(held[0].state()).toMatchObject({ status: "LOST", lost: true, renewals: { lost: 1 } });
      expect(logs.find("error", "Guard Failed").length).toBeGreaterThanOrEqual(1);
      const g = new SnowflakeId({ machine: held[0], layout: { machineBit: 2 }, logger: logs.logger });
      expect(() => g.nextId()).toThrow(MachineIdLostException);
    });

    it("a recycled id's next owner must start after the stalest owner's stop deadline, not after its last renewal", async () => {
      const ns = uniqueNamespace("recycle-stamp");
      const d = redisMachineIdDistributor(client);
      const req = (instanceId: string, now: number) => ({ namespace: ns, instanceId, machineBit: 1, safeGuardMs: 200, now, owner: instanceId });
      const t0 = Date.now();
      const a = await d.distribute(req("a", t0));
      await d.distribute(req("b", t0 + 5));
      await d.guard({ namespace: ns, instanceId: "b", leaseKey: "b", owner: "b", machineId: 1 - a.machineId, now: t0 + 5 });
      await new Promise((r) => setTimeout(r, 250)); // a (and b) not renewed for longer than T = 200 ms
      const c = await d.distribute(req("c", Date.now()));
      expect(c.machineId).toBe(a.machineId); // the stalest lease is recycled
      // a may have issued ids until its stop rule fired: T − min(10 s, T/10) = 180 ms after its last renewal
      expect(c.lastTimestamp).toBe(t0 + 180);
    });

    it("renews on a timer and records each renewal in state; debug shows distribution and renewal", async () => {
      const ns = uniqueNamespace("renew");
      const logs = captureLogs();
      const events: { namespace: string; event: string; machineId: number }[] = [];
      const onGuard = (m: unknown) => {
        const e = m as (typeof events)[number];
        if (e.namespace === ns) events.push(e);
      };
      diagnostics_channel.subscribe("gov:idgen:guard", onGuard);
      const l = await lease(ns, "a", { autoRenew: true, initialDelayMs: 30, delayMs: 30, safeGuardMs: 2_000, logger: logs.logger });
      // every 30 ms: two renewals are due after ~60 ms; waited for, so that a busy machine's late timers only slow this
      await expect.poll(() => l.state().renewals.success, { timeout: 5_000, interval: 20 }).toBeGreaterThanOrEqual(2);
      const st = l.state();
      expect(st).toMatchObject({ status: "UP", lastError: null, failedAt: null, distributor: "redis", namespace: ns, instanceId: "a" });
      expect(st.stopDeadline).toBe(st.lastRenewalAt + 1_800);
      expect(logs.find("debug", "Distributed machine id")).toHaveLength(1);
      expect(logs.find("debug", "Renewed machine id").length).toBeGreaterThanOrEqual(2);
      const g = new SnowflakeId({ machine: l, layout: { machineBit: 2 }, logger: logs.logger });
      expect(parseSnowflake(g.nextId(), g.layout).machineId).toBe(l.machineId);
      await l.revert();
      diagnostics_channel.unsubscribe("gov:idgen:guard", onGuard);
      expect(events[0]).toMatchObject({ event: "distributed", machineId: l.machineId });
      expect(events.filter((e) => e.event === "renewed").length).toBe(st.renewals.success);
      expect(events[events.length - 1].event).toBe("reverted");
    });
  });
}

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`lease re-established after the store lost it, on ${target.name}`, () => {
    it("writes a vanished lease back when nobody else holds the id, and new instances skip that id", async () => {
      const client = await connectRedis(target.url);
      try {
        const ns = uniqueNamespace("reestablish");
        const mk = (instanceId: string) =>
          MachineLease.acquire({ namespace: ns, instanceId, machineBit: 2, distributor: redisMachineIdDistributor(client), autoRenew: false, logger: captureLogs().logger });
        await mk("a");
        const b = await mk("b"); // id 1
        const k = machineKeys(ns);
        await client.del(k.itcIdx); // the store lost the lease set (restart without persistence, eviction)
        await client.del(k.adder);
        await b.renew();
        expect(b.state()).toMatchObject({ status: "UP", renewals: { success: 1 } });
        const ids = await Promise.all(["c", "d", "e"].map(async (i) => (await mk(i)).machineId));
        expect(ids.sort()).toEqual([0, 2, 3]); // 1 is b's again, so nobody else gets it
      } finally {
        client.disconnect();
      }
    });
  });
}
