// Shutdown is bounded even when a module cannot close (its store does not answer): the drain gets gov.shutdown.grace,
// the modules' closing SHUTDOWN_CLEANUP_MS, and what did not finish is said.
import { describe, expect, it } from "vitest";
import { buildProcess, createLogger, type ServiceModule } from "../src/index.js";
import { SHUTDOWN_CLEANUP_MS } from "../src/process-runner.js";

describe("shutdown with a module that never closes", () => {
  it("returns after the cleanup bound with a warning naming it", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger("test", "info", { write: (line: string) => void lines.push(JSON.parse(line)) });
    const stuck: ServiceModule = {
      name: "stuck",
      services: [],
      settings: {},
      ports: { port: 0, grpcPort: 0 },
      async create() {
        return { impls: [], health: () => ({ status: "UP" }), close: () => new Promise<void>(() => {}) }; // a store that never answers
      },
    };
    const proc = await buildProcess({ name: "t", modules: [stuck], sources: { file: {}, env: { GOV_SHUTDOWN_GRACE: "1s" } }, logger });
    await proc.listen({ port: 0, managementPort: 0, host: "127.0.0.1" });
    const started = Date.now();
    await proc.shutdown();
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(SHUTDOWN_CLEANUP_MS - 50);
    expect(took).toBeLessThan(SHUTDOWN_CLEANUP_MS + 3000);
    expect(lines.filter((l) => l.level === 40 && String(l.msg).includes("did not close within"))).toHaveLength(1);
  }, 20_000);
});
