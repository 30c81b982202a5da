// What stops a process at startup says what to change: a listener that cannot have its address names the setting
// (Node's EADDRINUSE names none, and a process has up to three listeners), and a bad gateway setting stops it before
// any module has opened anything.
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseDuration } from "@gov/settings";
import { buildProcess, createLogger, type GatewayBuilder, type ServiceModule } from "../src/index.js";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

/** A module with no RPCs: its process listens on the module's own endpoint settings (gov.quiet-service.*). */
const quiet: ServiceModule = {
  name: "quiet",
  services: [],
  settings: {},
  ports: { port: 0, grpcPort: 0 },
  async create() {
    return { impls: [], health: () => ({ status: "UP" }), close: async () => {} };
  },
};

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
    await expect(start({ GOV_QUIET_SERVICE_PORT: String(busyPort), GOV_QUIET_SERVICE_HOST: "127.0.0.1" })).rejects.toThrow(`setting gov.quiet-service.port is invalid: port ${busyPort} is in use on 127.0.0.1`);
    await expect(start({ MANAGEMENT_SERVER_PORT: String(busyPort), GOV_QUIET_SERVICE_HOST: "127.0.0.1" })).rejects.toThrow(`setting management.server.port is invalid: port ${busyPort} is in use`);
  });

  it("a host that is no address of this machine names the host setting", async () => {
    await expect(start({ GOV_QUIET_SERVICE_HOST: "192.0.2.77" })).rejects.toThrow(/setting gov\.quiet-service\.host is invalid: "192\.0\.2\.77" is neither an address of this machine/);
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
