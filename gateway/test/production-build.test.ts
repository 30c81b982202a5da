import { execFileSync, execSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const dir = mkdtempSync(join(tmpdir(), "gov-prod-"));
/** A project outside the repository that installs the shipped libraries from their packed tarballs. */
const consumer = mkdtempSync(join(tmpdir(), "gov-consumer-"));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(consumer, { recursive: true, force: true });
});

/** npm, quietly, in the copy (or `cwd`); the user's npm cache makes the install offline-fast after the first `npm ci`. */
function npm(args: string[], cwd = dir): string {
  return execFileSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], { cwd, stdio: "pipe", encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
}

/** The libraries that ship with the product (and the workspaces they depend on), packed as a user outside the repo installs them. */
const SHIPPED = ["api", "settings", "redis", "idgen", "idgen-monitor", "chat-client", "registry-client"];

/** Run in `consumer` against the product at PRODUCT_URL: each library used through its package name only. */
const CONSUMER_SCRIPT = `
import { createServer } from "node:http";
import { Provider } from "@gov/chat-client";
import { startIdGen, idgenConfigFromSettings } from "@gov/idgen";
import { IDGEN_METRIC_NAMES } from "@gov/idgen-monitor";
import { createRegistryClient } from "@gov/registry-client";

const idgen = await startIdGen(idgenConfigFromSettings({ "idgen.machine.machine-id": "7" }), {});
const ids = [idgen.registry.share.nextId(), idgen.registry.share.nextId()];
await idgen.close();

const model = createServer((req, res) => {
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ id: "c1", object: "chat.completion", created: 1, model: "m", choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "hello" } }] }));
});
await new Promise((r) => model.listen(0, "127.0.0.1", r));
const provider = new Provider({ baseURL: "http://127.0.0.1:" + model.address().port + "/v1", apiKey: "sk-test" });
const answer = await provider.chat.completions({ model: "m", messages: [{ role: "user", content: "Say hello" }] });
model.close();

const registry = createRegistryClient({ baseUrl: process.env.PRODUCT_URL, namespace: "dev", serviceId: "order" });
const me = await registry.register({ schema: "http", host: "10.0.0.1", port: 8080 });
const found = await registry.instances("order");
await registry.close();

console.log(JSON.stringify({ ids: ids.map(String), answer: answer.choices[0].message.content, metrics: IDGEN_METRIC_NAMES.length, registered: me.instanceId, found: found.map((i) => i.instanceId) }));
`;

/**
 * What production does: a clean copy of the tree, `npm ci`, `npm run build`, then dev dependencies pruned
 * (`npm prune --omit=dev` leaves what `npm ci --omit=dev` would) — and `npm start` must still run the product,
 * from compiled JavaScript, without tsx or TypeScript.
 */
describe("production build", () => {
  it("builds, runs with dev dependencies pruned, and serves the API; the shipped libraries install and work outside the repository", async () => {
    // the files git would check out (tracked, and new ones not ignored), without node_modules or dist
    execSync(`git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C ${JSON.stringify(dir)}`, { cwd: root });
    npm(["ci", "--prefer-offline"]);
    npm(["run", "build"]);
    expect(existsSync(join(dir, "packages/service-kit/dist/index.d.ts"))).toBe(true);
    // The shipped libraries, packed (dist/ and sources, not the tests) and installed into a project of their own.
    npm(["pack", ...SHIPPED.flatMap((p) => ["-w", `packages/${p}`]), "--pack-destination", consumer]);
    const tarballs = readdirSync(consumer).filter((f) => f.endsWith(".tgz"));
    expect(tarballs).toHaveLength(SHIPPED.length);
    writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    writeFileSync(join(consumer, "use.mjs"), CONSUMER_SCRIPT);
    npm(["install", "--prefer-offline", ...tarballs.map((t) => `./${t}`)], consumer);
    expect(existsSync(join(consumer, "node_modules/@gov/idgen/dist/index.js"))).toBe(true);
    expect(existsSync(join(consumer, "node_modules/@gov/idgen/test"))).toBe(false);
    npm(["prune", "--omit=dev"]);
    expect(existsSync(join(dir, "node_modules/.bin/tsc"))).toBe(false);
    expect(existsSync(join(dir, "node_modules/tsx"))).toBe(false);

    const env = { ...process.env, NODE_OPTIONS: "", PORT: "0", GOV_GRPC_PORT: "0", MANAGEMENT_SERVER_PORT: "0", HOST: "127.0.0.1", REDIS_URL: "", GOV_CONFIG: "", GOV_SECURITY_ENABLED: "false" };
    const child = spawn("npm", ["start", "--silent"], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    try {
      await expect.poll(() => out, { timeout: 30_000, interval: 100 }).toMatch(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1];
      const put = await fetch(`${url}/v1/namespaces/%7Bprod%7D/configs/app.yaml`, { method: "PUT", body: "port: 8080\n" });
      expect(await put.json()).toBe(true);
      const get = await fetch(`${url}/v1/namespaces/%7Bprod%7D/configs/app.yaml`);
      expect((await get.json()).data).toBe("port: 8080\n");
      expect(out).not.toMatch(/building/); // nothing to build with: it ran the dist/ left by `npm run build`

      const used = JSON.parse(execFileSync(process.execPath, ["use.mjs"], { cwd: consumer, encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "", PRODUCT_URL: url } }));
      expect(used.ids).toHaveLength(2);
      expect(BigInt(used.ids[1])).toBeGreaterThan(BigInt(used.ids[0]));
      expect(used.answer).toBe("hello");
      expect(used.metrics).toBeGreaterThan(0);
      expect(used).toMatchObject({ registered: "order@http#10.0.0.1#8080", found: ["order@http#10.0.0.1#8080"] });
    } finally {
      const exited = new Promise((r) => child.once("exit", r));
      process.kill(-child.pid!, "SIGTERM"); // npm and the node process it started
      await exited;
    }
  }, 240_000);
});
