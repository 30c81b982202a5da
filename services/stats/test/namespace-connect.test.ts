import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientsOf, createNamespaceProcess, freshSystem, namespaceTargets, ns, type NamespaceProcess } from "./namespace-harness.js";

const codeOf = (p: Promise<unknown>) => p.then(() => "ok", (e: unknown) => Code[ConnectError.from(e).code]);

/** Reads a server stream in the background; `ops` is what arrived so far. */
function follow<T extends { op: string }>(stream: AsyncIterable<T>, stop: AbortController) {
  const ops: string[] = [];
  const done = (async () => {
    try {
      for await (const m of stream) ops.push(m.op);
    } catch (err) {
      if (!stop.signal.aborted) throw err;
    }
  })();
  return { ops, close: async () => (stop.abort(), done) };
}

for (const target of namespaceTargets()) {
  describe.skipIf(target.skip)(`namespaces over Connect and gRPC on the ${target.name} store`, () => {
    let p: NamespaceProcess;
    let urls: { url: string; grpcUrl: string };
    beforeAll(async () => {
      p = await createNamespaceProcess(target.env);
      urls = await p.listen();
    });
    afterAll(async () => p?.close());

    it("a request that takes no fields, given one, is told to send {}", async () => {
      const res = await fetch(`${urls.url}/gov.stats.v1.NamespaceService/ListNamespaces`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ namespace: "{dev}" }) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { message: string }).message).toMatch(/key "namespace" is unknown: ListNamespacesRequest takes no fields: send \{\}$/);
    });

    for (const protocol of ["connect", "grpc"] as const) {
      it(`CRUD, current namespace and the refusals, over ${protocol}`, async () => {
        const { namespaces, configs } = clientsOf(urls, protocol);
        const n = ns();
        expect(await namespaces.createNamespace({ namespace: n })).toMatchObject({ created: true });
        expect(await namespaces.createNamespace({ namespace: n })).toMatchObject({ created: false });
        expect((await namespaces.listNamespaces({})).namespaces).toEqual(expect.arrayContaining([n, p.system]));
        expect(await namespaces.setCurrentNamespace({ namespace: n })).toMatchObject({ set: true });
        expect((await namespaces.getCurrentNamespace({})).namespace).toBe(n);
        await configs.setConfig({ namespace: n, configId: "a", data: "1" });
        expect(await codeOf(namespaces.deleteNamespace({ namespace: n }))).toBe("FailedPrecondition");
        expect(await codeOf(namespaces.deleteNamespace({ namespace: p.system, force: true }))).toBe("FailedPrecondition");
        expect(await codeOf(namespaces.createNamespace({ namespace: "dev" }))).toBe("InvalidArgument");
        expect(await codeOf(namespaces.setCurrentNamespace({ namespace: "current" }))).toBe("InvalidArgument");
        expect(await namespaces.deleteNamespace({ namespace: n, force: true })).toMatchObject({ removed: true, configs: 1, services: 0, instances: 0 });
        expect((await namespaces.getCurrentNamespace({})).namespace).toBe(p.system);
        expect(await codeOf(namespaces.deleteNamespace({ namespace: n }))).toBe("NotFound");
        expect(await codeOf(configs.getConfig({ namespace: n, configId: "a" }))).toBe("NotFound");
      });
    }

    it("a forced delete ends what watches and caches show: config watch sees remove, instance watch sees deregister", async () => {
      const { namespaces, configs, registry } = clientsOf(urls);
      const n = ns();
      await configs.setConfig({ namespace: n, configId: "app.yaml", data: "v: 1" });
      await registry.registerInstance({ namespace: n, serviceId: "order", schema: "http", host: "10.0.0.1", port: 80 });
      expect((await configs.getConfig({ namespace: n, configId: "app.yaml" })).config?.data).toBe("v: 1"); // warm the read cache
      const stop = new AbortController();
      const cfg = follow(configs.watchConfig({ namespace: n, configId: "app.yaml" }, { signal: stop.signal }), stop);
      const inst = follow(registry.watchInstances({ namespace: n, serviceId: "order" }, { signal: stop.signal }), stop);
      try {
        await expect.poll(() => [cfg.ops, inst.ops], { timeout: 3000 }).toEqual([["current"], ["current"]]);
        expect(await namespaces.deleteNamespace({ namespace: n, force: true })).toMatchObject({ configs: 1, services: 1, instances: 1 });
        await expect.poll(() => [cfg.ops, inst.ops], { timeout: 3000, interval: 10 }).toEqual([["current", "remove"], ["current", "deregister"]]);
        expect(await codeOf(configs.getConfig({ namespace: n, configId: "app.yaml" }))).toBe("NotFound");
        expect((await registry.listServices({ namespace: n })).serviceIds).toEqual([]);
      } finally {
        await cfg.close();
        await inst.close();
      }
    });

    it.runIf(target.name !== "embedded")("two processes on one Redis: a delete through one is followed by the other's caches and index", async () => {
      const other = await createNamespaceProcess(target.env, p.system);
      try {
        const b = clientsOf(await other.listen());
        const a = clientsOf(urls);
        const n = ns();
        await b.configs.setConfig({ namespace: n, configId: "c", data: "1" }); // b's index cache now knows n
        expect((await b.configs.getConfig({ namespace: n, configId: "c" })).config?.data).toBe("1"); // and its read cache the config
        await a.namespaces.deleteNamespace({ namespace: n, force: true });
        await expect.poll(() => codeOf(b.configs.getConfig({ namespace: n, configId: "c" })), { timeout: 3000, interval: 10 }).toBe("NotFound");
        expect((await b.namespaces.listNamespaces({})).namespaces).not.toContain(n);
        // b heard of the removal: its next write indexes the namespace again instead of trusting its cache
        await expect
          .poll(async () => (await b.configs.setConfig({ namespace: n, configId: "c", data: `x${Math.random()}` }), (await a.namespaces.listNamespaces({})).namespaces), { timeout: 3000, interval: 20 })
          .toContain(n);
      } finally {
        await other.close();
      }
    });

    it("a process on another system namespace has its own index and current namespace", async () => {
      const other = await createNamespaceProcess(target.env, freshSystem());
      try {
        const b = clientsOf(await other.listen());
        expect((await b.namespaces.listNamespaces({})).namespaces).toEqual([other.system]);
        expect((await b.namespaces.getCurrentNamespace({})).namespace).toBe(other.system);
      } finally {
        await other.close();
      }
    });
  });
}
