import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRegistryService } from "../src/registry-service.js";
import type { RegistryStore } from "../src/store/registry-store.js";
import { ns, storeTargets } from "./harness.js";

const ctx = {} as HandlerContext;

for (const target of storeTargets()) {
  describe.skipIf(target.skip)(`load-balanced choice on the ${target.name} store`, () => {
    let store: RegistryStore;
    beforeAll(async () => {
      store = await target.open();
    });
    afterAll(async () => store?.close());

    it("10,000 choices: each instance's share within 2 percentage points of its weight share; weight 0 never chosen", async () => {
      // The service's clock is the test's: the short-lived instance below expires when the test says, not when a
      // busy machine gets round to it.
      let now = Date.now();
      const service = createRegistryService({ store, namespaceRule: { requireHashTag: true }, instanceTtlMs: 60_000, now: () => now });
      const n = ns("lb");
      const weights: Record<string, number> = { a: 1, b: 2, c: 3, d: 4, zero: 0 };
      for (const [host, weight] of Object.entries(weights)) {
        await service.registerInstance({ namespace: n, serviceId: "s", schema: "http", host, port: 80, weight, metadata: {} } as never, ctx);
      }
      // an expired instance with a large weight must never be chosen either
      await service.registerInstance({ namespace: n, serviceId: "s", schema: "http", host: "expired", port: 80, weight: 100, metadata: {}, ttl: { seconds: 1n, nanos: 0 } } as never, ctx);
      expect((await store.listInstances(n, "s", now)).length).toBe(6);
      now += 1000;
      expect((await store.listInstances(n, "s", now)).length).toBe(5);
      const counts: Record<string, number> = {};
      const N = 10_000;
      for (let i = 0; i < N; i++) {
        const { instance } = await service.chooseInstance({ namespace: n, serviceId: "s" } as never, ctx);
        const host = instance!.host!;
        counts[host] = (counts[host] ?? 0) + 1;
      }
      expect(counts.zero).toBeUndefined();
      expect(counts.expired).toBeUndefined();
      for (const host of ["a", "b", "c", "d"]) expect(Math.abs(counts[host] / N - weights[host] / 10), host).toBeLessThan(0.02);
    }, 60_000);

    it("no live instance of weight above 0 → not_found", async () => {
      const service = createRegistryService({ store, namespaceRule: { requireHashTag: true }, instanceTtlMs: 60_000 });
      const n = ns("lb");
      const err = await Promise.resolve()
        .then(() => service.chooseInstance({ namespace: n, serviceId: "none" } as never, ctx))
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.NotFound);
    });
  });
}
