import { describe, expect, it } from "vitest";
import { connectRedis, parseRedisUrl, redactRedisUrl } from "../src/index.js";
import { createServer } from "node:net";

describe("REDIS_URL", () => {
  it("selects one server or a cluster, and says how to fix anything else", () => {
    expect(parseRedisUrl("redis://127.0.0.1:6379")).toEqual({ kind: "standalone", url: "redis://127.0.0.1:6379" });
    expect(parseRedisUrl("redis-cluster://u:p%40ss@a:7000,b:7001")).toEqual({
      kind: "cluster",
      nodes: [{ host: "a", port: 7000 }, { host: "b", port: 7001 }],
      username: "u",
      password: "p@ss",
    });
    expect(() => parseRedisUrl("localhost:6379")).toThrow(/redis:\/\/host:port.*redis-cluster:\/\//);
    expect(() => parseRedisUrl("redis-cluster://a:notaport")).toThrow(/not host:port/);
  });

  it("never shows a password in messages", async () => {
    expect(redactRedisUrl("redis://user:secret@h:1")).toBe("redis://user:***@h:1");
    const port = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, "127.0.0.1", () => {
        const { port } = srv.address() as { port: number };
        srv.close(() => resolve(port)); // nothing listens there afterwards
      });
    });
    const err = await connectRedis(`redis://user:secret@127.0.0.1:${port}`, { timeoutMs: 300 }).catch((e: Error) => e);
    expect((err as Error).message).toMatch(/did not become ready within 300 ms/);
    expect((err as Error).message).not.toContain("secret");
  });
});
