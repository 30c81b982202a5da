import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");

/** What `npm start` runs, as a real process: it must print where it listens and which store it uses. */
describe("npm start (all-in-one process)", () => {
  it("starts on the embedded store, says so, serves REST and Connect, and stops on SIGTERM", async () => {
    const env = { ...process.env, PORT: "0", GOV_GRPC_PORT: "0", MANAGEMENT_SERVER_PORT: "0", HOST: "127.0.0.1", REDIS_URL: "", GOV_CONFIG: "" };
    const child = spawn(process.execPath, ["--import", "tsx", join(root, "apps/main.ts")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    try {
      await expect.poll(() => out, { timeout: 20_000, interval: 100 }).toMatch(/Store \(config\): embedded[\s\S]*Store \(registry\): embedded/);
      const url = /listening on (http:\/\/\S+)/.exec(out)![1];
      expect(out).toMatch(/Governance platform listening on http:\/\/127\.0\.0\.1:\d+/);
      const put = await fetch(`${url}/v1/namespaces/%7Bdemo%7D/configs/app.yaml`, { method: "PUT", body: "hello" });
      expect(await put.json()).toBe(true);
      const rpc = await fetch(`${url}/gov.config.v1.ConfigService/GetConfig`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ namespace: "{demo}", configId: "app.yaml" }),
      });
      expect((await rpc.json()).config.data).toBe("hello");
      expect(out).toMatch(/gRPC \(h2c\) on http:\/\/127\.0\.0\.1:\d+/);
    } finally {
      const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
  });

  it("a bad setting stops startup with a message that names it", async () => {
    const env = { ...process.env, PORT: "0", GOV_CONFIG_HISTORY_MAX_VERSIONS: "lots", REDIS_URL: "", GOV_CONFIG: "" };
    const child = spawn(process.execPath, ["--import", "tsx", join(root, "apps/main.ts")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
    expect(code).toBe(1);
    expect(out).toContain("setting gov.config.history.max-versions (from environment variable GOV_CONFIG_HISTORY_MAX_VERSIONS) is invalid");
  });
});
