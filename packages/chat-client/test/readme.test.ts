/**
 * Keeps the README honest: every error class is documented, and every ```ts example runs against a local
 * server standing in for https://api.example.com/v1.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as api from "../src/index.js";
import { chunk, sse, startLoopbackServer, type LoopbackServer } from "./support/loopback-server.js";

const readme = readFileSync(fileURLToPath(new URL("../README.md", import.meta.url)), "utf8");
const entry = pathToFileURL(fileURLToPath(new URL("../src/index.ts", import.meta.url))).href;
const snippets = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);

describe("README", () => {
  it("names every exported error class", () => {
    const errorClasses = Object.entries(api).filter(
      ([, value]) => typeof value === "function" && (value === api.ChatClientError || value.prototype instanceof api.ChatClientError),
    );
    expect(errorClasses.map(([name]) => name).sort()).toEqual(
      ["ChatClientError", "ContentTypeError", "DecodeError", "EventSizeLimitError", "HttpStatusError", "NetworkError", "StreamError", "TimeoutError"].sort(),
    );
    for (const [name] of errorClasses) expect(readme, `README should document ${name}`).toContain(`| \`${name}\` |`);
  });

  describe("examples run", () => {
    let server: LoopbackServer;
    let dir: string;
    beforeAll(async () => {
      server = await startLoopbackServer();
      dir = mkdtempSync(join(tmpdir(), "chat-client-readme-"));
      server.handle((_req, res, body) => {
        const request = JSON.parse(body);
        if (request.messages.length === 0) {
          res.writeHead(429, { "content-type": "application/json", "x-request-id": "req_1" });
          return res.end(JSON.stringify({ error: { message: "Rate limit reached", type: "requests" } }));
        }
        if (request.stream) {
          res.writeHead(200, { "content-type": "text/event-stream" });
          return res.end(
            sse(chunk({ role: "assistant", content: "" })) +
              sse(chunk({ content: "Hello" })) +
              sse({ ...chunk({}), choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }) +
              sse("[DONE]"),
          );
        }
        const message = request.tools
          ? { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] }
          : { role: "assistant", content: "Hello" };
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ id: "chatcmpl-r", object: "chat.completion", created: 1, choices: [{ index: 0, message, finish_reason: "stop" }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
      });
    });
    afterAll(async () => {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it("the README has the examples the issue asks for", () => {
      expect(snippets.length).toBeGreaterThanOrEqual(6);
    });

    const expectedLogs: string[][] = [["Hello"], ["Hello"], ["Hello 2"], ['get_weather {"city":"Oslo"}'], ["chatcmpl-r"], ["rate limited: Rate limit reached req_1"]];
    snippets.forEach((source, i) => {
      it(`example ${i + 1} runs and prints what it should`, async () => {
        const logs: string[] = [];
        (globalThis as Record<string, unknown>).__readmeLog = logs;
        const code =
          `const console = { log: (...args: unknown[]) => (globalThis as any).__readmeLog.push(args.map((a) => typeof a === "string" ? a : JSON.stringify(a)).join(" ")) };\n` +
          source.replaceAll('"@gov/chat-client"', JSON.stringify(entry)).replaceAll("https://api.example.com/v1", `${server.origin}/v1`);
        const file = join(dir, `example-${i + 1}.ts`);
        writeFileSync(file, code);
        await import(pathToFileURL(file).href);
        expect(logs).toEqual(expectedLogs[i]);
        expect(server.requests.at(-1)?.headers.authorization).toMatch(/^Bearer (sk-\.\.\.|proxy-token)$/);
      });
    });
  });
});
