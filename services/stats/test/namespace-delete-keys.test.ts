// A namespace delete takes every key of the namespace with it on Redis, the statistics' `{ns}:stat` hash included —
// without force (a namespace emptied config by config, service by service) exactly as with force.
import { connectRedis } from "@gov/redis";
import { redisTargets } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespaceProcess, freshSystem, ns, seg, type NamespaceProcess } from "./namespace-harness.js";
import { FAST } from "./stats-harness.js";

const NS = "/v1/namespaces";

for (const target of redisTargets()) {
  describe.skipIf(target.skip)(`namespace delete on ${target.name}: no key of the namespace is left`, () => {
    let p: NamespaceProcess;
    beforeAll(async () => {
      p = await createNamespaceProcess({ REDIS_URL: target.url }, freshSystem(), FAST); // the statistics job runs every 300 ms
    });
    afterAll(async () => p?.close());
    const req = (method: string, url: string, payload?: string) =>
      p.proc.http.inject({ method: method as "GET", url, ...(payload === undefined ? {} : { payload, headers: { "content-type": "text/plain" } }) });

    /** The keys of namespace `n` (its hash tag puts them all on one node of a Cluster). */
    async function keysOf(n: string): Promise<string[]> {
      const raw = await connectRedis(target.url);
      try {
        const pattern = `${n.replace(/[*?[\]\\]/g, "\\$&")}:*`;
        if (!("nodes" in raw)) return (await raw.keys(pattern)).sort();
        const perNode = await Promise.all(raw.nodes("master").map((node) => node.keys(pattern)));
        return perNode.flat().sort();
      } finally {
        await raw.quit();
      }
    }

    for (const force of [false, true]) {
      it(`an emptied namespace deleted ${force ? "with" : "without"} force leaves no key, its stat included`, async () => {
        const n = ns("keys");
        expect((await req("PUT", `${NS}/${seg(n)}/configs/app.yaml`, "v: 1")).statusCode).toBe(200);
        // the statistics job has counted it: `{ns}:stat` exists
        await expect.poll(async () => (await req("GET", `${NS}/${seg(n)}/stat`)).json().configs, { timeout: 10_000, interval: 50 }).toBe(1);
        expect(await keysOf(n)).toContain(`${n}:stat`);
        expect((await req("DELETE", `${NS}/${seg(n)}/configs/app.yaml`)).statusCode).toBe(200);
        expect((await req("PUT", `${NS}/${seg(n)}/services/order`)).statusCode).toBe(200);
        await new Promise((r) => setTimeout(r, 700)); // swept: the registry's svc_stat holds it
        expect((await req("DELETE", `${NS}/${seg(n)}/services/order`)).statusCode).toBe(200);
        expect((await req("DELETE", `${NS}/${seg(n)}${force ? "?force=true" : ""}`)).json()).toBe(true);
        // Right after the delete only the stat's mark is left (its counts gone, the delete's time kept as `passAt`, so
        // that a statistics pass begun before the delete cannot write its counts back: commit 90cbd53), the same with
        // and without force; the next pass, which no longer lists the namespace, removes it.
        expect(await keysOf(n)).toEqual([`${n}:stat`]);
        expect((await req("GET", `${NS}/${seg(n)}/stat`)).json()).toMatchObject({ services: { total: 0, health: 0 }, instances: 0, configs: 0 });
        await expect.poll(() => keysOf(n), { timeout: 5_000, interval: 100 }).toEqual([]);
      });
    }
  });
}
