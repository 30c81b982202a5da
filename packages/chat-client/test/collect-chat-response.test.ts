/** collectChatResponse / ChatResponseAccumulator: folding chunks into the response a non-stream call would give. */
import { describe, expect, it } from "vitest";
import { ChatResponseAccumulator, collectChatResponse, type ChatResponse, type ChatStreamEvent } from "../src/index.js";

const head = { id: "chatcmpl-7", object: "chat.completion.chunk", created: 1700000001, model: "m", usage: null };
const chunkOf = (choices: unknown[], extra: Record<string, unknown> = {}) => ({ ...head, choices, ...extra }) as unknown as ChatResponse;

async function* eventsOf(chunks: ChatResponse[]): AsyncIterable<ChatStreamEvent> {
  for (const data of chunks) yield { event: "message", data };
}

describe("collectChatResponse", () => {
  it("joins content per choice (n = 2) and keeps each choice's finish_reason", async () => {
    const response = await collectChatResponse(
      eventsOf([
        chunkOf([{ index: 0, delta: { role: "assistant", content: "" } }, { index: 1, delta: { role: "assistant", content: "" } }]),
        chunkOf([{ index: 1, delta: { content: "Bon" } }]),
        chunkOf([{ index: 0, delta: { content: "Hel" } }, { index: 1, delta: { content: "jour" } }]),
        chunkOf([{ index: 0, delta: { content: "lo" }, finish_reason: null }]),
        chunkOf([{ index: 0, delta: {}, finish_reason: "stop" }, { index: 1, delta: {}, finish_reason: "length" }]),
      ]),
    );
    expect(response.choices).toEqual([
      { index: 0, message: { role: "assistant", content: "Hello" }, finish_reason: "stop" },
      { index: 1, message: { role: "assistant", content: "Bonjour" }, finish_reason: "length" },
    ]);
    expect(response).toMatchObject({ id: "chatcmpl-7", object: "chat.completion", created: 1700000001, model: "m" });
    expect(response).not.toHaveProperty("usage");
  });

  it("merges interleaved tool-call fragments by index, several per chunk", async () => {
    const tc = (calls: unknown[], finish_reason: string | null = null) => chunkOf([{ index: 0, delta: { tool_calls: calls }, finish_reason }]);
    const response = await collectChatResponse(
      eventsOf([
        chunkOf([{ index: 0, delta: { role: "assistant", content: null } }]),
        tc([
          { index: 0, id: "call_a", type: "function", function: { name: "weather", arguments: "" } },
          { index: 1, id: "call_b", type: "function", function: { name: "time", arguments: '{"tz"' } },
        ]),
        tc([{ index: 0, function: { arguments: '{"city":' } }]),
        tc([{ index: 1, function: { arguments: ':"CET"}' } }, { index: 0, function: { arguments: '"Oslo"}' } }]),
        chunkOf([{ index: 0, delta: {}, finish_reason: "tool_calls" }]),
      ]),
    );
    expect(response.choices[0]).toEqual({
      index: 0,
      finish_reason: "tool_calls",
      message: {
        role: "assistant",
        tool_calls: [
          { index: 0, id: "call_a", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } },
          { index: 1, id: "call_b", type: "function", function: { name: "time", arguments: '{"tz":"CET"}' } },
        ],
      },
    });
  });

  it("takes usage from the usage-only chunk and keeps unknown text fields like refusal", async () => {
    const acc = new ChatResponseAccumulator();
    acc.add(chunkOf([{ index: 0, delta: { role: "assistant", refusal: "I can't " } }], { system_fingerprint: "fp_1" }));
    acc.add(chunkOf([{ index: 0, delta: { refusal: "help with that." }, finish_reason: "stop" }]));
    acc.add(chunkOf([], { usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 } }));
    const response = acc.result();
    expect(response.choices[0].message).toEqual({ role: "assistant", refusal: "I can't help with that." });
    expect(response.usage).toEqual({ prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 });
    expect(response.system_fingerprint).toBe("fp_1");
  });

  it("assembles a legacy function_call like a tool call; a repeated empty id keeps the call's id; logprobs are joined", async () => {
    const chunk = (delta: object, extra: object = {}) => ({ data: { id: "r", object: "chat.completion.chunk", created: 1, choices: [{ index: 0, delta, ...extra }] } }) as unknown as ChatStreamEvent;
    const lp = (token: string) => ({ logprobs: { content: [{ token, logprob: -1 }] } });
    const merged = await collectChatResponse(
      (async function* () {
        yield chunk({ role: "assistant", function_call: { name: "get_weather", arguments: "" } }, lp("a"));
        yield chunk({ function_call: { arguments: '{"city":' } }, lp("b"));
        yield chunk({ function_call: { arguments: '"Oslo"}' } });
        yield chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "{" } }] });
        yield chunk({ tool_calls: [{ index: 0, id: "", type: "", function: { name: "", arguments: "}" } }] });
      })(),
    );
    const choice = merged.choices[0] as { message: Record<string, unknown>; logprobs: unknown };
    expect(choice.message.function_call).toEqual({ name: "get_weather", arguments: '{"city":"Oslo"}' });
    expect(choice.message.tool_calls).toEqual([{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }]);
    expect(choice.logprobs).toEqual({ content: [{ token: "a", logprob: -1 }, { token: "b", logprob: -1 }] });
  });

  it("rejects when the stream errors", async () => {
    async function* failing(): AsyncIterable<ChatStreamEvent> {
      yield { event: "message", data: chunkOf([{ index: 0, delta: { content: "a" } }]) };
      throw new Error("cut");
    }
    await expect(collectChatResponse(failing())).rejects.toThrow("cut");
  });
});
