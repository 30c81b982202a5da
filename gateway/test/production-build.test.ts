import { execFileSync, execSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const dir = mkdtempSync(join(tmpdir(), "gov-prod-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** npm, quietly, in the copy; the user's npm cache makes the install offline-fast after the first `npm ci`. */
function npm(args: string[]): void {
  execFileSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], { cwd: dir, stdio: "pipe", env: { ...process.env, NODE_OPTIONS: "" } });
}

/**
 * What production does: a clean copy of the tree, `npm ci`, `npm run build`, then dev dependencies pruned
 * (`npm prune --omit=dev` leaves what `npm ci --omit=dev` would) — and `npm start` must still run the product,
 * from compiled JavaScript, without tsx or TypeScript.
 */
describe("production build", () => {
  it("builds, runs with dev dependencies pruned, and serves the API", async () => {
    // the files git would check out (tracked, and new ones not ignored), without node_modules or dist
    execSync(`git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C ${JSON.stringify(dir)}`, { cwd: root });
    npm(["ci", "--prefer-offline"]);
    npm(["run", "build"]);
    expect(existsSync(join(dir, "packages/service-kit/dist/index.d.ts"))).toBe(true);
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
    } finally {
      const exited = new Promise((r) => child.once("exit", r));
      process.kill(-child.pid!, "SIGTERM"); // npm and the node process it started
      await exited;
    }
  }, 240_000);
});
