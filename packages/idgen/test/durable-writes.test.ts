import { connectRedis, quitQuietly, requireReplicas, type RedisClient } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MachineLease, redisMachineIdDistributor, redisSegmentDistributor, SegmentChainId } from "../src/index.js";
import { captureLogs, uniqueNamespace } from "./helpers.js";

/*
 * Redis replicates asynchronously: a lease or a segment range written on a master that crashes before a replica has it
 * is gone after the failover, and the next process is handed the same machine id or the same range. The process
 * guards against that with `gov.redis.min-replicas` (`requireReplicas`: WAIT after each durable write); the id
 * generator's writes must go through it too. Here the policy asks for more replicas than the servers have, so every
 * durable write is reported under-replicated: a write that skips the policy is not counted.
 */
for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`idgen writes honour the client's replica policy on ${target.name}`, () => {
    let client: RedisClient;
    let underReplicated = 0;
    beforeAll(async () => {
      client = await connectRedis(target.url);
      await requireReplicas(client, { minReplicas: 5, timeoutMs: 20, underReplicated: { inc: () => void underReplicated++ } });
    });
    afterAll(() => quitQuietly(client));

    it("distribution, renewal and release of a machine id wait for the replicas", async () => {
      const before = underReplicated;
      const lease = await MachineLease.acquire({ namespace: uniqueNamespace("durable"), instanceId: "a", machineBit: 2, distributor: redisMachineIdDistributor(client), autoRenew: false, logger: captureLogs().logger });
      expect(underReplicated).toBe(before + 1);
      await lease.renew();
      expect(lease.state().status).toBe("UP");
      expect(underReplicated).toBe(before + 2);
      await lease.revert();
      expect(underReplicated).toBe(before + 3);
    });

    it("a segment range is reserved with a durable write", async () => {
      const before = underReplicated;
      const chain = await SegmentChainId.create({ distributor: redisSegmentDistributor(client, { namespace: uniqueNamespace("durable"), name: "seg" }), step: 10, logger: captureLogs().logger });
      chain.stop();
      expect(chain.nextId()).toBe(1);
      expect(underReplicated).toBeGreaterThan(before);
    });
  });
}
