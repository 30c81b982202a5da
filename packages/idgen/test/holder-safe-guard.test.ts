import { connectRedis, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { machineKeys, MachineIdOverflowException, SnowflakeId } from "../src/index.js";
import { captureLogs, redisLeases, uniqueNamespace } from "./helpers.js";

/** What startIdGen gives a lease with idgen.machine.guarder.enabled=false: no renewals, and T "forever". */
const GUARDER_OFF = { safeGuardMs: Number.MAX_SAFE_INTEGER / 4 };

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`a lease is recycled only after its holder's safe-guard duration, on ${target.name}`, () => {
    let client: RedisClient;
    beforeAll(async () => {
      client = await connectRedis(target.url);
    });
    afterAll(() => client?.disconnect());
    const lease = redisLeases(() => client, 1);

    it("a claimant with a shorter T takes neither a lease with the guarder off nor one of its own instance id", async () => {
      const ns = uniqueNamespace("holder-guard-off");
      const a = await lease(ns, "a", GUARDER_OFF);
      const f = await lease(ns, "f", GUARDER_OFF);
      // longer than the claimant's T: by its own rule both leases are stale, but their holders never stop issuing
      await new Promise((r) => setTimeout(r, 1_700));
      await expect(lease(ns, "b", { safeGuardMs: 1_500 })).rejects.toBeInstanceOf(MachineIdOverflowException);
      await expect(lease(ns, "a", { safeGuardMs: 1_500 })).rejects.toBeInstanceOf(MachineIdOverflowException);
      expect([a.state().status, f.state().status]).toEqual(["UP", "UP"]);
      await Promise.all([a.revert(), f.revert()]);
    });

    it("keeps each holder's T beside the lease entries, which keep the format earlier releases parse, and drops it with the lease", async () => {
      const ns = uniqueNamespace("holder-guard-format");
      const k = machineKeys(ns);
      const a = await lease(ns, "a", { safeGuardMs: 60_000 });
      await a.renew();
      // exactly "machineId|leaseAt|lastStamp": a release before the guard hash failed every distribution on anything else
      // (a rollback of an upgrade could not start a process while one of this release held a lease)
      expect(Object.values(await client.hgetall(k.itcIdx))).toEqual([expect.stringMatching(/^-?\d+\|-?\d+\|-?\d+$/)]);
      expect(await client.hgetall(k.guard)).toEqual({ a: "60000" });
      // a stale lease recycled by a claimant (both ids taken: machine bit 1): its holder's T goes with it
      const stale = await lease(ns, "s", { safeGuardMs: 300 });
      expect(await client.hgetall(k.guard)).toEqual({ a: "60000", s: "300" });
      await expect.poll(async () => (await lease(ns, "c", { safeGuardMs: 300 }).catch(() => undefined))?.machineId, { timeout: 5_000, interval: 100 }).toBe(stale.machineId);
      expect(await client.hgetall(k.guard)).toEqual({ a: "60000", c: "300" });
      await a.revert(); // and a release takes its T along
      expect(await client.hgetall(k.guard)).toEqual({ c: "300" });
    });

    it("two processes with different T issue no id twice", async () => {
      const ns = uniqueNamespace("holder-guard-longer");
      const logs = captureLogs();
      const a = await lease(ns, "a", { safeGuardMs: 60_000 });
      const f = await lease(ns, "f", { safeGuardMs: 60_000 });
      await new Promise((r) => setTimeout(r, 1_700));
      const b = await lease(ns, "b", { safeGuardMs: 1_500 }).catch((err: unknown) => err);
      if (!(b instanceof MachineIdOverflowException)) {
        // before the fix: b recycled a live lease, and both issued the same ids
        const seen = new Set<bigint>();
        const gens = [a, f, b as typeof a].map((m) => new SnowflakeId({ machine: m, layout: { machineBit: 1 }, logger: logs.logger }));
        for (let i = 0; i < 3_000; i++) for (const g of gens) seen.add(g.nextId());
        expect(seen.size).toBe(9_000);
      }
      expect(b).toBeInstanceOf(MachineIdOverflowException);
      // a renewal keeps the holder's T with the lease
      await Promise.all([a.renew(), f.renew()]);
      await new Promise((r) => setTimeout(r, 1_700));
      await expect(lease(ns, "c", { safeGuardMs: 1_500 })).rejects.toBeInstanceOf(MachineIdOverflowException);
      await Promise.all([a.revert(), f.revert()]);
    });
  });
}
