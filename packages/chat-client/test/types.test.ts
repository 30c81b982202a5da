/** Compile-time contract of the public types (checked by tsc; the runtime part only keeps vitest happy). */
import { describe, expectTypeOf, it } from "vitest";
import type { ChatClient, ChatRequest, ChatResponse, ChatStream, ChatStreamEvent, ChatToolChoice, Message, ProviderOptions, BaseURLCapable } from "../src/index.js";

declare const client: ChatClient;
const messages: Message[] = [{ role: "user", content: "hi" }];

describe("completions() result type follows the literal stream flag (rule 1)", () => {
  it("literal true gives the stream type", () => {
    const call = () => client.completions({ model: "m", messages, stream: true });
    expectTypeOf(call).returns.resolves.toEqualTypeOf<ChatStream>();
    expectTypeOf<ChatStream>().toMatchTypeOf<ReadableStream<ChatStreamEvent>>();
    expectTypeOf<ChatStream>().toMatchTypeOf<AsyncIterable<ChatStreamEvent>>();
    expectTypeOf<ChatStreamEvent["data"]>().toEqualTypeOf<ChatResponse>();
  });

  it("false or absent gives ChatResponse", () => {
    expectTypeOf(() => client.completions({ model: "m", messages, stream: false })).returns.resolves.toEqualTypeOf<ChatResponse>();
    expectTypeOf(() => client.completions({ model: "m", messages })).returns.resolves.toEqualTypeOf<ChatResponse>();
    expectTypeOf(() => client.completions({ model: "m", messages, temperature: 0.2 })).returns.resolves.toEqualTypeOf<ChatResponse>();
  });

  it("a boolean flag or a broad ChatRequest gives the union", () => {
    const flag = Math.random() > 0.5;
    expectTypeOf(() => client.completions({ model: "m", messages, stream: flag })).returns.resolves.toEqualTypeOf<ChatStream | ChatResponse>();
    const broad: ChatRequest = { model: "m", messages };
    expectTypeOf(() => client.completions(broad)).returns.resolves.toEqualTypeOf<ChatStream | ChatResponse>();
  });
});

describe("request and option types", () => {
  it("tool_choice has no 'required' literal", () => {
    expectTypeOf<"required">().not.toMatchTypeOf<ChatToolChoice>();
    expectTypeOf<ChatToolChoice>().toEqualTypeOf<"none" | "auto" | { type: "function"; function: { name: string } }>();
    // @ts-expect-error 'required' is not a ChatToolChoice in this version
    void (() => client.completions({ model: "m", messages, tool_choice: "required" }));
    // @ts-expect-error 'required' is not a ChatToolChoice in this version
    const choice: ChatRequest["tool_choice"] = "required";
    void choice;
  });

  it("model and messages are required; optional fields have the seed's types", () => {
    // @ts-expect-error model is required
    void (() => client.completions({ messages }));
    // @ts-expect-error messages is required
    void (() => client.completions({ model: "m" }));
    expectTypeOf<ChatRequest["stop"]>().toEqualTypeOf<string | string[] | null | undefined>();
    expectTypeOf<ChatRequest["logit_bias"]>().toEqualTypeOf<Record<string, number> | null | undefined>();
    expectTypeOf<ChatRequest["seed"]>().toEqualTypeOf<number | undefined>();
    expectTypeOf<Message>().toMatchTypeOf<{ content?: string; role?: string }>();
    expectTypeOf<ProviderOptions>().toMatchTypeOf<BaseURLCapable>();
    expectTypeOf<ProviderOptions>().toEqualTypeOf<{ baseURL: string; apiKey: string }>();
  });

  it("ChatResponse requires choices, created, id, object and usage and allows more", () => {
    expectTypeOf<ChatResponse>().toHaveProperty("usage");
    expectTypeOf<{ choices: []; created: 1; id: "x"; object: "o" }>().not.toMatchTypeOf<ChatResponse>();
    expectTypeOf<{ choices: []; created: 1; id: "x"; object: "o"; usage: { completion_tokens: 1; prompt_tokens: 1; total_tokens: 2 }; extra: true }>().toMatchTypeOf<ChatResponse>();
  });
});
