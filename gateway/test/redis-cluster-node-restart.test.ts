import { hashTagOn, masterPortForKey, patternSubscriberPort, startRedisCluster, type RedisClusterServers } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createTestGateway, seg, type TestGateway } from "./harness.js";

/**
 * A Cluster master that is not the one carrying the process's Pub/Sub connection restarts without persistence: its
 * data is gone when it answers again, and the process's subscriber, on another node, hears nothing of it. The read
 * cache kept answering 200 with a config that no longer existed (for as long as the subscription lived), and a watch
 * skipped the versions that started again at 1 — acknowledged changes never delivered.
 */
describe.skipIf(inject("redisSkipReason"))("a gateway on a Redis Cluster whose other master restarts empty", () => {
  let cluster: RedisClusterServers;
  let gw: TestGateway;
  let url: string;
  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    gw = await createTestGateway(undefined, undefined, true, { REDIS_URL: cluster.url });
    ({ url } = await gw.listen());
  }, 40_000);
  afterAll(async () => {
    await gw?.close();
    await cluster?.stop();
  });

  it("reads stop answering what is gone, and a watch resyncs and delivers the versions that start again at 1", { timeout: 90_000 }, async () => {
    const witness = cluster.masters[0].port;
    // a watch subscribes the process's hub: then its node is known, and the victim is another master
    const probe = await fetch(`${url}/v1/namespaces/${seg("{probe}")}/configs/p/watch`);
    await probe.body!.getReader().read();
    let subscriberPort: number | undefined;
    await expect.poll(async () => (subscriberPort = await patternSubscriberPort(cluster.ports)), { timeout: 10_000, interval: 100 }).toBeDefined();
    const victim = cluster.masters.find((m) => m.port !== subscriberPort && m.port !== witness) ?? cluster.masters.find((m) => m.port !== subscriberPort)!;
    const namespace = await hashTagOn(victim.port, `restart${process.pid}`, witness);
    expect(await masterPortForKey(witness, `${namespace}:cfg`)).toBe(victim.port);
    const path = `${url}/v1/namespaces/${seg(namespace)}/configs/app.yaml`;
    const put = (body: string) => fetch(path, { method: "PUT", body }).then((r) => r.status);
    expect(await put("before: 1\n")).toBe(200);
    expect(await put("before: 2\n")).toBe(200);
    expect((await (await fetch(path)).json()).data).toBe("before: 2\n"); // read, and cached

    const watch = await fetch(`${path}/watch`);
    const reader = watch.body!.getReader();
    const decoder = new TextDecoder();
    let events = "";
    void (async () => {
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (done) return;
        events += decoder.decode(value, { stream: true });
      }
    })();
    await expect.poll(() => events, { timeout: 5_000 }).toContain("before: 2");

    await cluster.restart(victim.port); // without persistence: empty
    // the config is gone from the store: not answered from the cache
    await expect.poll(async () => (await fetch(path)).status, { timeout: 20_000, interval: 200 }).toBe(404);
    // written again, it starts at version 1; the watch was told to resync and delivers it
    await expect.poll(() => put("after: 1\n"), { timeout: 20_000, interval: 200 }).toBe(200);
    await expect.poll(() => events, { timeout: 10_000, interval: 100 }).toContain("after: 1");
    expect(events).toContain('"op":"resync"');
    await reader.cancel();
    await probe.body?.cancel().catch(() => {});
  });
});
