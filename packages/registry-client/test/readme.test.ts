/**
 * Keeps the README honest: every error class is documented, and every ```ts example runs against a real registry with
 * security on (config, registry and security modules behind the REST gateway and the security guard: `npm start` less
 * the stats module, on the embedded store), with TOKEN the super user's access token, and prints what it should.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, ROOT_PASSWORD, startSecure, type SecureProcess } from "../../../services/security/test/harness.js";
import * as api from "../src/index.js";

const readme = readFileSync(fileURLToPath(new URL("../README.md", import.meta.url)), "utf8");
const entry = pathToFileURL(fileURLToPath(new URL("../src/index.ts", import.meta.url))).href;
const snippets = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);

describe("README", () => {
  it("names every exported error class", () => {
    const errorClasses = Object.entries(api).filter(
      ([, value]) => typeof value === "function" && (value === api.RegistryClientError || value.prototype instanceof api.RegistryClientError),
    );
    expect(errorClasses.map(([name]) => name).sort()).toEqual(["AlreadyRegisteredError", "ClientClosedError", "NoInstanceError", "RegistryClientError"]);
    for (const [name] of errorClasses) expect(readme, `README should document ${name}`).toContain(`| \`${name}\` |`);
  });

  describe("examples run", () => {
    let gateway: SecureProcess;
    let urls: { url: string; grpcUrl: string };
    let dir: string;
    let token: string;
    const tokenBefore = process.env.TOKEN;
    // A plain name, as a service would configure it: the client sends it as {name}.
    const plain = `readme${process.pid}x${Date.now().toString(36)}`;
    beforeAll(async () => {
      gateway = await startSecure({ name: "embedded" });
      urls = { url: gateway.url, grpcUrl: gateway.grpcUrl };
      ({ accessToken: token } = await gateway.login("root", ROOT_PASSWORD));
      process.env.TOKEN = token; // what the examples read, as after the root README's login
      dir = mkdtempSync(join(tmpdir(), "registry-client-readme-"));
    });
    afterAll(async () => {
      if (tokenBefore === undefined) delete process.env.TOKEN;
      else process.env.TOKEN = tokenBefore;
      await gateway?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it("the registry the examples run against has security on: without accessToken a call is unauthenticated", async () => {
      const anonymous = api.createRegistryClient({ baseUrl: urls.url, namespace: plain, serviceId: "checkout", callTimeoutMs: 2000 });
      try {
        await expect(anonymous.instances("order")).rejects.toMatchObject({ code: Code.Unauthenticated });
      } finally {
        await anonymous.close();
      }
    });

    it("the README has an example of registering, of keepalive, of discovery and of a transport", () => {
      expect(snippets.length).toBe(4);
    });

    const expectedLogs = () => [
      [`{${plain}}`, "order@http#10.0.0.1#8080 registered", "closed"],
      ["worker@http#10.0.0.3#8080 registered", "closed"],
      [JSON.stringify(["order@http#10.0.0.2#8080 weight 1 zone b"]), "http://10.0.0.2:8080", `service "payment" has no live instance of weight above 0 in namespace "{${plain}}"`],
      ["1"],
    ];
    snippets.forEach((source, i) => {
      it(`example ${i + 1} runs and prints what it should`, async () => {
        if (i === 2) {
          // The instance the discovery example finds (example 1 deregistered its own on close).
          const remote = createClient(RegistryService, createConnectTransport({ baseUrl: urls.url, httpVersion: "1.1", interceptors: [bearer(token)] }));
          await remote.registerInstance({ namespace: `{${plain}}`, serviceId: "order", schema: "http", host: "10.0.0.2", port: 8080, metadata: { zone: "b" } });
        }
        const logs: string[] = [];
        (globalThis as Record<string, unknown>).__readmeLog = logs;
        const code =
          `const console = { log: (...args: unknown[]) => (globalThis as any).__readmeLog.push(args.map((a) => typeof a === "string" ? a : JSON.stringify(a)).join(" ")) };\n` +
          source
            .replaceAll('"@gov/registry-client"', JSON.stringify(entry))
            .replaceAll("http://localhost:8080", urls.url)
            .replaceAll("http://localhost:9090", urls.grpcUrl)
            .replaceAll('namespace: "dev"', `namespace: ${JSON.stringify(plain)}`)
            .replaceAll('namespace: "{dev}"', `namespace: ${JSON.stringify(`{${plain}}`)}`);
        const file = join(dir, `example-${i + 1}.ts`);
        writeFileSync(file, code);
        await import(pathToFileURL(file).href);
        expect(logs).toEqual(expectedLogs()[i]);
      });
    });
  });
});
