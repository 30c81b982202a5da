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
      await expect.poll(() => out, { timeout: 20_000, interval: 100 }).toMatch(/Store \(config\): embedded[\s\S]*Store \(registry\): embedded[\s\S]*Security on/);
      const url = /listening on (http:\/\/\S+)/.exec(out)![1];
      expect(out).toMatch(/Governance platform listening on http:\/\/127\.0\.0\.1:\d+/);
      // Security is on by default: the generated super-user password is shown once on stdout, with how to log in.
      const password = /Super user \\?"root\\?" created with the password: ([\w-]+)/.exec(out)?.[1];
      expect(password, out).toBeDefined();
      expect(out).toContain("/v1/authenticate/root/login");
      expect(out).toMatch(/Security on: log in with POST \/v1\/authenticate\/root\/login/);
      expect((await fetch(`${url}/v1/namespaces/%7Bdemo%7D/configs/app.yaml`, { method: "PUT", body: "hello" })).status).toBe(401);
      const login = await fetch(`${url}/v1/authenticate/root/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ password }) });
      const { accessToken } = (await login.json()) as { accessToken: string };
      const authorization = `Bearer ${accessToken}`;
      const put = await fetch(`${url}/v1/namespaces/%7Bdemo%7D/configs/app.yaml`, { method: "PUT", body: "hello", headers: { authorization } });
      expect(await put.json()).toBe(true);
      const rpc = await fetch(`${url}/gov.config.v1.ConfigService/GetConfig`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization },
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

  it("with gov.security.enabled=false says loudly that everything is open, and is", async () => {
    const env = { ...process.env, PORT: "0", GOV_GRPC_PORT: "0", MANAGEMENT_SERVER_PORT: "0", HOST: "127.0.0.1", REDIS_URL: "", GOV_CONFIG: "", GOV_SECURITY_ENABLED: "false" };
    const child = spawn(process.execPath, ["--import", "tsx", join(root, "apps/main.ts")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    try {
      await expect.poll(() => out, { timeout: 20_000, interval: 100 }).toMatch(/!!! SECURITY IS OFF \(gov.security.enabled=false\)/);
      expect(out).not.toContain("created with the password");
      const url = /listening on (http:\/\/\S+)/.exec(out)![1];
      expect(await (await fetch(`${url}/v1/namespaces/%7Bdemo%7D/configs/app.yaml`, { method: "PUT", body: "open" })).json()).toBe(true);
    } finally {
      // Ctrl-C on `npm start`: the process gets SIGINT from the terminal and again from npm, moments apart; that is one
      // request to stop, still graceful (the second used to kill it on the spot).
      const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
      child.kill("SIGINT");
      await expect.poll(() => out, { timeout: 5000, interval: 5 }).toContain("shutting down");
      child.kill("SIGINT");
      expect(await exited).toBe(0);
      expect(out).toMatch(/"msg":"stopped"/);
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
