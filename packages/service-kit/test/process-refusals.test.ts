// What stops a process says what to change or what was left: a listener that cannot have its address names the setting
// (Node's EADDRINUSE names none, and a process has up to three listeners); a bad gateway setting stops it before any
// module has opened anything; a shutdown is bounded even when a module cannot close (its store does not answer).
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseDuration } from "@gov/settings";
import { buildProcess, createLogger, type GatewayBuilder, type ServiceModule } from "../src/index.js";
import { SHUTDOWN_CLEANUP_MS } from "../src/process-runner.js";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

/**
 * A module with no RPCs: its process listens on the module's own endpoint settings (gov.<name>-service.*); `close` is
 * how it closes (a store that never answers: a promise that never settles).
 */
const idleModule = (name: string, close: () => Promise<void> = async () => {}): ServiceModule => ({
  name,
  services: [],
  settings: {},
  ports: { port: 0, grpcPort: 0 },
  async create() {
    return { impls: [], health: () => ({ status: "UP" }), close };
  },
});
const quiet = idleModule("quiet");

describe("listen failures name the setting", () => {
  let busy: Server;
  let busyPort: number;
  beforeAll(async () => {
    busy = createServer();
    await new Promise<void>((r) => busy.listen(0, "127.0.0.1", r));
    busyPort = (busy.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((r) => busy.close(() => r())));

  const start = async (env: Record<string, string>) => {
    const proc = await buildProcess({ name: "t", modules: [quiet], sources: { file: {}, env: { GOV_SHUTDOWN_GRACE: "1s", MANAGEMENT_SERVER_PORT: "0", ...env } }, logger });
    try {
      await proc.listen();
      return "listening";
    } finally {
      await proc.shutdown();
    }
  };

  it("a port in use names its setting: the service's port, or the management port", async () => {
    await expect(start({ GOV_QUIET_SERVICE_PORT: String(busyPort), GOV_QUIET_SERVICE_HOST: "127.0.0.1" })).rejects.toThrow(`setting gov.quiet-service.port (from environment variable GOV_QUIET_SERVICE_PORT) is invalid: port ${busyPort} is in use on 127.0.0.1`);
    await expect(start({ MANAGEMENT_SERVER_PORT: String(busyPort), GOV_QUIET_SERVICE_HOST: "127.0.0.1" })).rejects.toThrow(`setting management.server.port (from environment variable MANAGEMENT_SERVER_PORT) is invalid: port ${busyPort} is in use`);
  });

  it("a host that is no address of this machine names the host setting", async () => {
    await expect(start({ GOV_QUIET_SERVICE_HOST: "192.0.2.77" })).rejects.toThrow(/setting gov\.quiet-service\.host \(from environment variable GOV_QUIET_SERVICE_HOST\) is invalid: "192\.0\.2\.77" is neither an address of this machine/);
  });
});

describe("a gateway's settings", () => {
  it("are read before any module is created: a bad one stops startup naming it, with nothing opened", async () => {
    let created = 0;
    const counting: ServiceModule = { ...quiet, create: async (ctx) => (created++, quiet.create(ctx)) };
    const gateway = (async () => {
      throw new Error("not built: its settings stop startup first");
    }) as GatewayBuilder;
    gateway.settings = { heartbeat: { name: "gov.sse.heartbeat", parse: parseDuration, default: 15_000, doc: "" } };
    const sources = { file: {}, env: { GOV_SSE_HEARTBEAT: "often" } };
    await expect(buildProcess({ name: "t", modules: [counting], gateway, sources, logger })).rejects.toThrow(/setting gov\.sse\.heartbeat \(from environment variable GOV_SSE_HEARTBEAT\) is invalid/);
    expect(created).toBe(0);
  });
});

describe("shutdown with a module that never closes", () => {
  it("returns after the cleanup bound (the drain had gov.shutdown.grace) with a warning naming it", async () => {
    const lines: Record<string, unknown>[] = [];
    const captured = createLogger("test", "info", { write: (line: string) => void lines.push(JSON.parse(line)) });
    const stuck = idleModule("stuck", () => new Promise<void>(() => {}));
    const proc = await buildProcess({ name: "t", modules: [stuck], sources: { file: {}, env: { GOV_SHUTDOWN_GRACE: "1s" } }, logger: captured });
    await proc.listen({ port: 0, managementPort: 0, host: "127.0.0.1" });
    const started = Date.now();
    await proc.shutdown();
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(SHUTDOWN_CLEANUP_MS - 50);
    expect(took).toBeLessThan(SHUTDOWN_CLEANUP_MS + 3000);
    expect(lines.filter((l) => l.level === 40 && String(l.msg).includes("did not close within"))).toHaveLength(1);
  }, 20_000);
});
