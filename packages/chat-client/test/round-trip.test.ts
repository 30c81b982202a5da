/** Provider → ChatClient → a real loopback HTTP server and back, in non-stream and stream mode. */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { collectChatResponse, Provider, type ChatRequest } from "../src/index.js";
import { chunk, sleep, sse, startLoopbackServer, within, type LoopbackServer } from "./support/loopback-server.js";

let server: LoopbackServer;
beforeAll(async () => (server = await startLoopbackServer()));
afterAll(() => server.close());
beforeEach(() => (server.requests.length = 0));

const completion = {
  id: "chatcmpl-9",
  object: "chat.completion",
  created: 1700000000,
  model: "test-model",
  choices: [{ index: 0, message: { role: "assistant", content: "Hello!" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
  system_fingerprint: "fp_1",
};

function json(status: number, body: unknown, headers: Record<string, string> = {}) {
  return (_req: unknown, res: import("node:http").ServerResponse) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };
}

describe("non-stream round trip", () => {
  it("POSTs to {baseURL}/chat/completions with the Bearer key and resolves to the parsed response", async () => {
    server.handle(json(200, completion));
    const provider = new Provider({ baseURL: `${server.origin}/v1`, apiKey: "sk-test-123" });
    const response = await provider.chat.completions({ model: "test-model", messages: [{ role: "user", content: "Hi" }] });
    expect(response).toEqual(completion);
    expect(response.choices[0].message?.content).toBe("Hello!");
    const [request] = server.requests;
    expect(request.method).toBe("POST");
    expect(request.url).toBe("/v1/chat/completions");
    expect(request.headers.authorization).toBe("Bearer sk-test-123");
    expect(request.headers["content-type"]).toBe("application/json");
  });

  it("keeps a baseURL's query (Azure's ?api-version=…) after the path", async () => {
    server.handle(json(200, completion));
    const provider = new Provider({ baseURL: `${server.origin}/openai/deployments/d1?api-version=2024-10-21`, apiKey: "k" });
    await provider.chat.completions({ model: "test-model", messages: [{ role: "user", content: "Hi" }] });
    expect(server.requests[0].url).toBe("/openai/deployments/d1/chat/completions?api-version=2024-10-21");
  });

  it("forwards the body exactly: optional fields untouched (null, 0, false kept), no defaults added", async () => {
    server.handle(json(200, completion));
    const request: ChatRequest = {
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "assistant", tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "call_1", content: "42" },
      ],
      temperature: 0,
      top_p: 1,
      n: 1,
      seed: 7,
      logit_bias: null,
      stop: null,
      response_format: { type: "json_object" },
      stream: false,
      user: "u-1",
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }],
      tool_choice: { type: "function", function: { name: "f" } },
    };
    await new Provider({ baseURL: server.origin, apiKey: "k" }).chat.completions(request);
    expect(server.requests[0].body).toBe(JSON.stringify(request));
  });

  it("sends a minimal request with exactly the two required fields", async () => {
    server.handle(json(200, completion));
    await new Provider({ baseURL: server.origin, apiKey: "k" }).chat.completions({ model: "m", messages: [] });
    expect(JSON.parse(server.requests[0].body)).toEqual({ model: "m", messages: [] });
  });

  it("rule 4: the /v1 segment comes only from baseURL; a trailing slash is normalised", async () => {
    server.handle(json(200, completion));
    await new Provider({ baseURL: `${server.origin}/v1/`, apiKey: "k" }).chat.completions({ model: "m", messages: [] });
    await new Provider({ baseURL: server.origin, apiKey: "k" }).chat.completions({ model: "m", messages: [] });
    await new Provider({ baseURL: `${server.origin}/openai/v1`, apiKey: "k" }).chat.completions({ model: "m", messages: [] });
    expect(server.requests.map((r) => r.url)).toEqual(["/v1/chat/completions", "/chat/completions", "/openai/v1/chat/completions"]);
  });
});

describe("stream round trip", () => {
  it("resolves to an async-iterable ReadableStream of {event, id, retry, data} envelopes", async () => {
    server.handle((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
      res.end(sse(chunk({ role: "assistant", content: "" })) + sse(chunk({ content: "Hel" })) + sse(chunk({ content: "lo" })) + sse("[DONE]"));
    });
    const stream = await new Provider({ baseURL: server.origin, apiKey: "sk-s" }).chat.completions({ model: "m", messages: [], stream: true });
    expect(stream).toBeInstanceOf(ReadableStream);
    const events = [];
    for await (const event of stream) events.push(event);
    expect(events.map((e) => e.data.choices[0].delta?.content)).toEqual(["", "Hel", "lo"]);
    expect(events[0]).toEqual({ event: "message", id: undefined, retry: undefined, data: chunk({ role: "assistant", content: "" }) });
    expect(server.requests[0].headers.authorization).toBe("Bearer sk-s");
    expect(JSON.parse(server.requests[0].body)).toEqual({ model: "m", messages: [], stream: true });
  });

  it("survives real packets split mid-event and mid-UTF-8 character, written with delays", async () => {
    const wire = Buffer.from(sse(chunk({ content: "Грüß 😀" })) + ": keep-alive\r\n\r\n" + sse(chunk({ content: " 世界" })) + sse("[DONE]"));
    server.handle(async (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      // Cut points chosen to land inside "data:", inside the JSON, and inside multi-byte characters.
      const cuts = [3, 17, wire.indexOf(Buffer.from("ü")) + 1, wire.indexOf(Buffer.from("😀")) + 2, wire.indexOf(Buffer.from("世")) + 1, wire.length - 4, wire.length];
      let from = 0;
      for (const to of cuts) {
        res.write(wire.subarray(from, to));
        from = to;
        await sleep(15);
      }
      res.end();
    });
    const stream = await new Provider({ baseURL: server.origin, apiKey: "k" }).chat.completions({ model: "m", messages: [], stream: true });
    const texts: string[] = [];
    for await (const event of stream) texts.push(event.data.choices[0].delta!.content!);
    expect(texts).toEqual(["Грüß 😀", " 世界"]);
  });

  it("[DONE] ends iteration at once while the server keeps the socket open, and the connection is released", async () => {
    server.handle((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(sse(chunk({ content: "a" })) + sse("[DONE]")); // and never end()
    });
    const started = Date.now();
    const stream = await new Provider({ baseURL: server.origin, apiKey: "k" }).chat.completions({ model: "m", messages: [], stream: true });
    const texts: string[] = [];
    for await (const event of stream) texts.push(event.data.choices[0].delta!.content!);
    expect(texts).toEqual(["a"]);
    expect(Date.now() - started).toBeLessThan(2000);
    // The client cancelled the body, so the server sees the socket close although it never ended the response.
    await within(2000, server.requests[0].socketClosed, "the client to release the connection");
  });

  it("collectChatResponse folds a streamed answer with tool calls into one ChatResponse", async () => {
    const tool = (calls: unknown[]) => chunk({ tool_calls: calls });
    server.handle((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(
        sse(chunk({ role: "assistant", content: "" })) +
          sse(chunk({ content: "Checking" })) +
          sse(tool([{ index: 0, id: "call_w", type: "function", function: { name: "weather", arguments: "" } }])) +
          sse(tool([{ index: 0, function: { arguments: '{"city":' } }])) +
          sse(tool([{ index: 0, function: { arguments: '"Oslo"}' } }])) +
          sse({ ...chunk({}), choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }) +
          sse({ ...chunk({}), choices: [], usage: { prompt_tokens: 4, completion_tokens: 9, total_tokens: 13 } }) +
          sse("[DONE]"),
      );
    });
    const stream = await new Provider({ baseURL: server.origin, apiKey: "k" }).chat.completions({ model: "m", messages: [], stream: true });
    const response = await collectChatResponse(stream);
    expect(response).toEqual({
      id: "chatcmpl-1",
      object: "chat.completion",
      created: 1700000000,
      model: "test-model",
      choices: [
        {
          index: 0,
          finish_reason: "tool_calls",
          message: {
            role: "assistant",
            content: "Checking",
            tool_calls: [{ index: 0, id: "call_w", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } }],
          },
        },
      ],
      usage: { prompt_tokens: 4, completion_tokens: 9, total_tokens: 13 },
    });
  });
});
