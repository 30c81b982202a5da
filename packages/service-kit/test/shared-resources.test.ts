// ModuleContext.shared: the modules of one process get one instance per key, and the process closes it once, after them.
import { describe, expect, it } from "vitest";
import { buildProcess, createLogger, type ModuleContext, type ServiceModule } from "../src/index.js";

const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");
const sources = { file: {}, env: { GOV_SHUTDOWN_GRACE: "1s" } };

/** A module without RPCs that asks the process for `key` and records what happens, in order. */
function moduleAsking(name: string, key: string, log: string[], open: () => Promise<{ close(): Promise<void> }>, got: unknown[]): ServiceModule {
  return {
    name,
    services: [],
    settings: {},
    ports: { port: 0, grpcPort: 0 },
    async create(ctx: ModuleContext) {
      got.push(await ctx.shared(key, open));
      return { impls: [], health: () => ({ status: "UP" }), close: async () => void log.push(`close ${name}`) };
    },
  };
}

describe("ModuleContext.shared", () => {
  it("opens once for every module of the process and closes once, after every module", async () => {
    const log: string[] = [];
    const got: unknown[] = [];
    let opened = 0;
    const open = async () => {
      opened++;
      return { close: async () => void log.push("close shared") };
    };
    const proc = await buildProcess({ name: "t", modules: [moduleAsking("a", "store", log, open, got), moduleAsking("b", "store", log, open, got)], sources, logger });
    expect(opened).toBe(1);
    expect(got[0]).toBe(got[1]);
    await proc.shutdown();
    await proc.shutdown();
    expect(log).toEqual(["close b", "close a", "close shared"]);
  });

  it("different keys are different resources; a failed open is not remembered", async () => {
    const log: string[] = [];
    const got: unknown[] = [];
    let attempts = 0;
    const flaky = async () => {
      if (attempts++ === 0) throw new Error("store unreachable");
      return { close: async () => void log.push("close flaky") };
    };
    await expect(buildProcess({ name: "t", modules: [moduleAsking("a", "k", log, flaky, got)], sources, logger })).rejects.toThrow("store unreachable");
    const proc = await buildProcess({
      name: "t",
      modules: [moduleAsking("a", "k", log, flaky, got), moduleAsking("b", "other", log, async () => ({ close: async () => void log.push("close other") }), got)],
      sources,
      logger,
    });
    expect(got[0]).not.toBe(got[1]);
    await proc.shutdown();
    expect(log).toEqual(["close b", "close a", "close other", "close flaky"]);
  });
});
