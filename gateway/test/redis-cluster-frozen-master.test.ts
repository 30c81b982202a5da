import { masterPortForKey, pauseProcesses, promotedMasterPort, resumeProcesses, startRedisCluster, type RedisClusterServers } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createTestGateway, ns, seg, type TestGateway } from "./harness.js";

/**
 * The master that holds a namespace's configs, the system namespace (`gov-{system}`: the namespace index) and the ID
 * generator's machine-id lease (`{gov}`) freezes — its connections stay open and nothing is answered — and the
 * Cluster promotes its replica. A running gateway must carry on by itself on the new master: writes used to answer
 * 504 for as long as the old master stayed frozen (its client never asked where the slots had gone), and the lease,
 * never renewed, was lost a few minutes later.
 */
describe.skipIf(inject("redisSkipReason"))("a gateway on a Redis Cluster whose system master freezes", () => {
  let cluster: RedisClusterServers;
  let gw: TestGateway;
  let urls: { url: string; managementUrl: string };
  beforeAll(async () => {
    cluster = await startRedisCluster(3, { replicas: 1 });
    gw = await createTestGateway(undefined, undefined, true, {
      REDIS_URL: cluster.url,
      IDGEN_MACHINE_GUARDER_INITIAL_DELAY: "300ms",
      IDGEN_MACHINE_GUARDER_DELAY: "300ms",
      IDGEN_MACHINE_GUARDER_RETRY_DELAY: "300ms",
      IDGEN_MACHINE_GUARDER_REQUEST_TIMEOUT: "1s",
    });
    urls = await gw.listen();
  }, 40_000);
  afterAll(async () => {
    if (cluster) resumeProcesses(cluster.pids); // never leave a stopped process behind
    await gw?.close();
    await cluster?.stop();
  });

  it("config writes and reads, and the machine-id lease, carry on on the promoted replica while the old master stays frozen", { timeout: 90_000 }, async () => {
    const witness = cluster.masters[0].port; // asked where the slots live
    const systemPort = await masterPortForKey(witness, "gov-{system}:ns_idx");
    expect(await masterPortForKey(witness, "{gov}:machine")).toBe(systemPort); // one freeze covers both
    const victim = cluster.masters.find((m) => m.port === systemPort)!;
    expect(victim.port).not.toBe(witness);
    let namespace = ns();
    while ((await masterPortForKey(witness, `${namespace}:cfg`)) !== victim.port) namespace = ns(); // its configs there too
    const path = `${urls.url}/v1/namespaces/${seg(namespace)}/configs/app.yaml`;
    const put = (body: string) => fetch(path, { method: "PUT", body }).then(async (r) => `${r.status} ${r.status === 200 ? "" : (await r.json()).code}`);
    const read = () => fetch(path).then(async (r) => (r.status === 200 ? (await r.json()).data : `${r.status}`));
    const machineId = async () => (await (await fetch(`${urls.managementUrl}/actuator/health`)).json()).components.machineId.status;
    expect(await put("v: 1\n")).toBe("200 ");
    await expect.poll(machineId, { timeout: 5_000, interval: 50 }).toBe("UP");

    const resume = pauseProcesses([victim.pid]);
    try {
      // The write's outcome is unknown while the master is frozen.
      expect(await put("v: frozen\n")).toMatch(/^50[34] /);
      await promotedMasterPort(witness, "gov-{system}:ns_idx", victim.port);
      const failedOverAt = performance.now();
      await expect.poll(() => put("v: 3\n"), { timeout: 20_000, interval: 100 }).toBe("200 ");
      const writable = performance.now() - failedOverAt;
      expect(await read()).toBe("v: 3\n");
      await expect.poll(machineId, { timeout: 20_000, interval: 100 }).toBe("UP");
      console.info(`writes acknowledged again ${Math.round(writable)} ms after the failover, the old master still frozen`);
    } finally {
      resume();
    }
    // The old master wakes up and rejoins as a replica; the write it held stays unapplied.
    for (let i = 0; i < 10; i++) expect(await read()).toBe("v: 3\n");
    expect(await put("v: 4\n")).toBe("200 ");
    expect(await read()).toBe("v: 4\n");
  });
});
