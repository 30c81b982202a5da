import { buildProcess } from "@gov/service-kit";
import { startRedis } from "@gov/testkit";
import { describe, expect, inject, it } from "vitest";
import { platform } from "../../../apps/platform.js";
import { capturedLogger, sources, waitUntil } from "./helpers.js";

describe.skipIf(inject("redisSkipReason"))("shutdown of the all-in-one process with a frozen Redis", () => {
  it("logs the seed's Revert machine id of [...] failed once, though the modules' last writes used up the cleanup bound", async () => {
    const server = await startRedis();
    const log = capturedLogger();
    const proc = await buildProcess({ ...platform, logger: log.logger, sources: sources({ REDIS_URL: server.url, IDGEN_MACHINE_INSTANCE_ID: "host-frozen:1" }) });
    await proc.listen({ port: 0, grpcPort: 0, managementPort: 0, host: "127.0.0.1" });
    // as in production after the first second: the stats worker holds its mutex, whose release waits on Redis first
    await waitUntil("the stat mutex", () => log.lines.some((l) => String(l.msg).startsWith("acquired the stat mutex")));
    process.kill(server.pid!, "SIGSTOP"); // answers nothing, keeps its connections open
    try {
      await proc.shutdown();
    } finally {
      process.kill(server.pid!, "SIGCONT");
      await server.stop();
    }
    expect(log.find("Revert machine id of [host-frozen:1] failed")).toEqual([expect.objectContaining({ level: 50, logger: "gov.idgen" })]);
  }, 40_000);
});
