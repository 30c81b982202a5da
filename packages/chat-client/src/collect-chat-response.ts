/**
 * Folds stream chunks into the `ChatResponse` a non-stream call would have returned: text deltas are
 * concatenated, tool-call fragments are merged by their `index`, and the usage-only chunk supplies `usage`.
 */
import type { ChatResponse, ChatStreamEvent, Choice, Message } from "./types.js";

interface ToolCallDelta {
  index?: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
  [key: string]: unknown;
}

/** Accumulates chunks one at a time, for callers that render deltas as they arrive and still want the total. */
export class ChatResponseAccumulator {
  #head: Record<string, unknown> | undefined;
  readonly #choices = new Map<number, Choice & { message: Message }>();
  #usage: ChatResponse["usage"] | undefined;

  /** Merges one chunk (or one stream event's `data`). */
  add(chunk: ChatResponse): void {
    const { choices, usage, ...head } = chunk;
    // id, created, model, system_fingerprint…: the latest non-null value wins.
    this.#head = { ...this.#head, ...withoutNullish(head) };
    if (usage) this.#usage = usage;
    for (const choice of choices ?? []) this.#addChoice(choice);
  }

  /** The merged response; `object` becomes `chat.completion` and choices are ordered by index. */
  result(): ChatResponse {
    const choices = [...this.#choices.values()].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
    const response = { ...this.#head, object: "chat.completion", choices } as ChatResponse;
    if (this.#usage) response.usage = this.#usage;
    return response;
  }

  #addChoice(choice: Choice): void {
    const index = choice.index ?? 0;
    let merged = this.#choices.get(index);
    if (!merged) {
      merged = { index, message: {}, finish_reason: null };
      this.#choices.set(index, merged);
    }
    const { delta, index: _index, finish_reason, logprobs, ...rest } = choice;
    Object.assign(merged, withoutNullish(rest));
    if (logprobs) mergeLogprobs(merged, logprobs as Record<string, unknown>);
    if (finish_reason) merged.finish_reason = finish_reason;
    if (delta) mergeDelta(merged.message, delta);
  }
}

/** Reads a stream to its end and returns the merged response. Stream errors reject the promise. */
export async function collectChatResponse(stream: AsyncIterable<ChatStreamEvent>): Promise<ChatResponse> {
  const accumulator = new ChatResponseAccumulator();
  for await (const event of stream) accumulator.add(event.data);
  return accumulator.result();
}

function mergeDelta(message: Message, delta: Message): void {
  for (const [key, value] of Object.entries(delta)) {
    if (value === null || value === undefined) continue;
    if (key === "tool_calls" && Array.isArray(value)) mergeToolCalls(message, value as ToolCallDelta[]);
    // the legacy single call, streamed like a tool call's function: its name whole, its arguments in fragments
    else if (key === "function_call" && typeof value === "object") mergeFunction((message.function_call ??= { name: "", arguments: "" }) as ToolCallDelta["function"] & object, value as ToolCallDelta["function"] & object);
    // content, refusal, reasoning_content…: text fragments are concatenated; role and other scalars are set.
    else if (typeof value === "string" && key !== "role") message[key] = (typeof message[key] === "string" ? message[key] : "") + value;
    else message[key] = value;
  }
}

function mergeToolCalls(message: Message, deltas: ToolCallDelta[]): void {
  const calls: ToolCallDelta[] = (message.tool_calls ??= []);
  for (const delta of deltas) {
    const index = delta.index ?? calls.length;
    let call = calls.find((c) => c.index === index);
    if (!call) {
      call = { index, id: "", type: "function", function: { name: "", arguments: "" } };
      calls.push(call);
    }
    // id, type and name are identifiers sent whole (usually in the first fragment; later ones may repeat them empty,
    // which must not erase them: the answer's tool message names the call by its id); only arguments are streamed.
    const { function: fn, index: _index, ...rest } = delta;
    Object.assign(call, withoutNullish(rest, true));
    if (fn) mergeFunction(call.function!, fn);
  }
}

function mergeFunction(into: { name?: string; arguments?: string }, fragment: { name?: string; arguments?: string }): void {
  if (fragment.name) into.name = fragment.name;
  if (fragment.arguments) into.arguments = (into.arguments ?? "") + fragment.arguments;
}

/** Token log probabilities arrive per chunk (`content`, `refusal`: lists of tokens): joined, in order. */
function mergeLogprobs(choice: Record<string, unknown>, logprobs: Record<string, unknown>): void {
  const merged = ((choice.logprobs as Record<string, unknown> | null | undefined) ??= {});
  for (const [key, value] of Object.entries(logprobs)) {
    if (Array.isArray(value)) merged[key] = [...((Array.isArray(merged[key]) ? merged[key] : []) as unknown[]), ...value];
    else if (value !== null && value !== undefined) merged[key] = value;
  }
}

function withoutNullish(record: Record<string, unknown>, orEmpty = false): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key in record) if (record[key] !== null && record[key] !== undefined && !(orEmpty && record[key] === "")) out[key] = record[key];
  return out;
}
