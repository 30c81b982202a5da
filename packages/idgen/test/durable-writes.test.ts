import { connectRedis, quitQuietly, requireReplicas, UnderReplicatedWriteError, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MachineLease, redisMachineIdDistributor, redisSegmentDistributor, SegmentChainId } from "../src/index.js";
import { captureLogs, uniqueNamespace } from "./helpers.js";

/*
 * Redis replicates asynchronously: a lease or a segment range written on a master that crashes before a replica has it
 * is gone after the failover, and the next process is handed the same machine id or the same range. The process
 * guards against that with `gov.redis.min-replicas` (`requireReplicas`: WAIT after each durable write); the id
 * generator's writes go through it too, and what it hands out is used only once the replicas have it. Here the
 * policy asks for more replicas than the servers have, so every durable write is under-replicated: a write that skips
 * the policy is not counted, and a grant that is used anyway is the defect.
 */
for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`idgen writes honour the client's replica policy on ${target.name}`, () => {
    let client: RedisClient;
    let plain: RedisClient;
    let underReplicated = 0;
    beforeAll(async () => {
      client = await connectRedis(target.url);
      plain = await connectRedis(target.url);
      await requireReplicas(client, { minReplicas: 5, timeoutMs: 20, underReplicated: { inc: () => void underReplicated++ } });
    });
    afterAll(async () => {
      await quitQuietly(client);
      await quitQuietly(plain);
    });

    it("a machine id the replicas did not get is not used, and is released again", async () => {
      const namespace = uniqueNamespace("durable");
      const before = underReplicated;
      const acquire = (redis: RedisClient, instanceId: string) =>
        MachineLease.acquire({ namespace, instanceId, machineBit: 2, distributor: redisMachineIdDistributor(redis), autoRenew: false, logger: captureLogs().logger });
      const refused = await acquire(client, "a").catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(UnderReplicatedWriteError);
      expect((refused as Error).message).toMatch(/^machine id 0 of namespace ".*" for instance "a": Redis write acknowledged by 0 of 5 required replicas within 20 ms: .* not used; retry when the replicas are back$/);
      expect(underReplicated).toBe(before + 2); // the distribution, and its release
      // released on the master: the next process is handed the same id (released ids go first), not a new one
      const next = await acquire(plain, "b");
      expect(next.state().machineId).toBe(0);
      await next.revert();
    });

    it("renewing and releasing a lease already held wait for the replicas, and a renewal short of them still counts", async () => {
      const before = underReplicated;
      // distributed while the replicas were there (a client without the policy stands in for that moment)
      const held = redisMachineIdDistributor(plain);
      const distributor = { ...redisMachineIdDistributor(client), distribute: held.distribute };
      const lease = await MachineLease.acquire({ namespace: uniqueNamespace("durable"), instanceId: "a", machineBit: 2, distributor, autoRenew: false, logger: captureLogs().logger });
      await lease.renew();
      expect(lease.state().status).toBe("UP");
      expect(underReplicated).toBe(before + 1);
      await lease.revert();
      expect(underReplicated).toBe(before + 2);
    });

    it("an id range the replicas did not get is skipped: a gap in the ids, never an id twice", async () => {
      const namespace = uniqueNamespace("durable");
      const before = underReplicated;
      const strict = redisSegmentDistributor(client, { namespace, name: "seg" });
      await expect(strict.nextMaxId(10)).rejects.toBeInstanceOf(UnderReplicatedWriteError);
      expect(underReplicated).toBe(before + 1);
      await expect(SegmentChainId.create({ distributor: strict, step: 10, logger: captureLogs().logger })).rejects.toThrow();
      // the refused ranges (1–10 and the chain's) stay taken on the master: the next range starts after them
      const chain = await SegmentChainId.create({ distributor: redisSegmentDistributor(plain, { namespace, name: "seg" }), step: 10, logger: captureLogs().logger });
      chain.stop();
      expect(chain.nextId()).toBeGreaterThan(20);
    });
  });
}
