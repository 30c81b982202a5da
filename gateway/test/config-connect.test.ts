import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import JSZip from "jszip";
import { configClients, createTestGateway, ns, storeTargets, type TestGateway } from "./harness.js";

for (const target of storeTargets()) {
  describe.skipIf(target.skip)(`config service via Connect clients on the ${target.name} store`, () => {
    let gw: TestGateway;
    let url: { url: string; grpcUrl: string };
    beforeAll(async () => {
      gw = await createTestGateway(await target.open());
      url = await gw.listen();
    });
    afterAll(async () => gw?.close());

    it("every RPC works over Connect and gRPC-Web (HTTP/1.1 port) and gRPC (h2c port)", async () => {
      for (const { name, client } of configClients(url)) {
        const n = ns(name.replace(/\W/g, ""));
        expect(await client.setConfig({ namespace: n, configId: "a.yaml", data: "v1" })).toMatchObject({ changed: true, version: 1 });
        expect(await client.setConfig({ namespace: n, configId: "a.yaml", data: "v2" })).toMatchObject({ changed: true, version: 2 });
        expect(await client.setConfig({ namespace: n, configId: "a.yaml", data: "v2" })).toMatchObject({ changed: false, version: 2 });
        expect((await client.listConfigs({ namespace: n })).configIds).toEqual(["a.yaml"]);
        expect((await client.getConfig({ namespace: n, configId: "a.yaml" })).config).toMatchObject({ data: "v2", version: 2 });
        expect(await client.rollbackConfig({ namespace: n, configId: "a.yaml", targetVersion: 1 })).toMatchObject({ changed: true, version: 3 });
        const versions = (await client.listConfigVersions({ namespace: n, configId: "a.yaml" })).versions;
        expect(versions.map((v) => v.version)).toEqual([2, 1]);
        expect((await client.getConfigVersion({ namespace: n, configId: "a.yaml", version: 2 })).version).toMatchObject({ data: "v2", op: "rollback" });

        const chunks: Uint8Array[] = [];
        let fileName = "";
        for await (const part of client.exportConfigs({ namespace: n })) {
          fileName ||= part.fileName;
          chunks.push(part.body!.data);
        }
        expect(fileName).toMatch(/_configs_\d+\.zip$/);
        const zip = await JSZip.loadAsync(Buffer.concat(chunks));
        expect(await zip.file("a.yaml")!.async("string")).toBe("v1");

        const n2 = ns("copy");
        const imported = await client.importConfigs({ namespace: n2, importZip: Buffer.concat(chunks) });
        expect(imported).toMatchObject({ total: 1, succeeded: 1 });
        expect(imported.results[0]).toMatchObject({ configId: "a.yaml", outcome: "created" });

        expect(await client.deleteConfig({ namespace: n, configId: "a.yaml" })).toMatchObject({ removed: true });
        const err = await client.getConfig({ namespace: n, configId: "a.yaml" }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ConnectError);
        expect([name, (err as ConnectError).code]).toEqual([name, Code.NotFound]);
        const bad = await client.listConfigs({ namespace: "dev" }).catch((e: unknown) => e);
        expect([name, (bad as ConnectError).code, (bad as ConnectError).rawMessage]).toEqual([name, Code.InvalidArgument, expect.stringContaining("hash tag")]);
      }
    });

    it("WatchConfig streams the current state, then each change as it happens", async () => {
      const [{ client }] = configClients(url);
      const n = ns("watch");
      await client.setConfig({ namespace: n, configId: "w", data: "first" });
      const seen: { op: string; data?: string; version?: number }[] = [];
      const done = (async () => {
        for await (const ev of client.watchConfig({ namespace: n, configId: "w" })) {
          seen.push({ op: ev.op, data: ev.config?.data, version: ev.config?.version });
          if (seen.length === 4) break; // leaving the loop cancels the stream
        }
      })();
      await expect.poll(() => seen.length).toBe(1);
      await client.setConfig({ namespace: n, configId: "w", data: "second" });
      await client.rollbackConfig({ namespace: n, configId: "w", targetVersion: 1 });
      await client.deleteConfig({ namespace: n, configId: "w" });
      await done;
      expect(seen).toEqual([
        { op: "current", data: "first", version: 1 },
        { op: "set", data: "second", version: 2 },
        { op: "rollback", data: "first", version: 3 },
        { op: "remove", data: undefined, version: undefined },
      ]);
    });

    it("the REST watch is a text/event-stream of the same messages, and ends when the client leaves", async () => {
      const n = ns("sse");
      const base = `${url.url}/v1/namespaces/${encodeURIComponent(n)}/configs/s.yaml`;
      await fetch(base, { method: "PUT", body: "one" });
      const ac = new AbortController();
      const res = await fetch(`${base}/watch`, { signal: ac.signal });
      expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      const events = () => [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]) as { op: string; config?: { data: string; version: number } });
      const readUntil = async (count: number) => {
        while (events().length < count) {
          const { value, done } = await reader.read();
          if (done) break;
          text += value;
        }
      };
      await readUntil(1);
      await fetch(base, { method: "PUT", body: "two" });
      await fetch(base, { method: "DELETE" });
      await readUntil(3);
      ac.abort();
      expect(events().map((e) => [e.op, e.config?.data, e.config?.version])).toEqual([
        ["current", "one", 1],
        ["set", "two", 2],
        ["remove", undefined, undefined],
      ]);
    });
  });
}
