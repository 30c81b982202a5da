/**
 * Wire types of the Chat Completions API as the library declares them. They are declarations, not
 * validation: responses are passed through as parsed, and extra properties are allowed where providers add them.
 */

/** Anything that carries the base address requests are resolved against. */
export interface BaseURLCapable {
  /** Base address, e.g. `https://api.example.com/v1`. Paths are appended after a single `/`. */
  baseURL: string;
}

/** Options of {@link Provider}. There is no default endpoint: `baseURL` is required. */
export interface ProviderOptions extends BaseURLCapable {
  /** Sent as `Authorization: Bearer <apiKey>`. Not validated by the library. */
  apiKey: string;
}

/** One chat message. `content` and `role` are typed; anything else (tool_calls, tool_call_id, …) passes through. */
export interface Message {
  content?: string;
  role?: string;
  [key: string]: any;
}

export interface ChatToolFunction {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
}

export interface ChatTool {
  type: "function";
  function: ChatToolFunction;
}

/** This version declares no `'required'` literal. */
export type ChatToolChoice = "none" | "auto" | { type: "function"; function: { name: string } };

/** A chat request. Optional fields are forwarded exactly as given; the library adds no defaults. */
export interface ChatRequest {
  model: string;
  messages: Message[];
  frequency_penalty?: number;
  presence_penalty?: number;
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  n?: number;
  seed?: number;
  logit_bias?: Record<string, number> | null;
  response_format?: Record<string, unknown>;
  stop?: string | string[] | null;
  stream?: boolean;
  user?: string;
  tools?: ChatTool[];
  tool_choice?: ChatToolChoice;
}

export interface Usage {
  completion_tokens: number;
  prompt_tokens: number;
  total_tokens: number;
  [key: string]: any;
}

export interface Choice {
  finish_reason?: string | null;
  index?: number;
  message?: Message;
  delta?: Message;
  [key: string]: any;
}

/**
 * A chat response, and also the type of each stream chunk. Chunks may omit `usage` (or carry `null`) and a
 * usage-only chunk has `choices: []`, so stream consumers use only the fields that are present.
 */
export interface ChatResponse {
  choices: Choice[];
  created: number;
  id: string;
  object: string;
  usage: Usage;
  [key: string]: any;
}

/** One server-sent event whose `data` was parsed as JSON. */
export interface JsonServerSentEvent<T> {
  /** The SSE `event` field; `"message"` when the server sent none. */
  event: string;
  /** The parsed `data` field (multi-line data is joined with `\n` before parsing). */
  data: T;
  /** The last `id` the server sent on this stream, if any. */
  id?: string;
  /** The last `retry` (milliseconds) the server sent on this stream, if any. */
  retry?: number;
}

/** One item of a chat stream. */
export type ChatStreamEvent = JsonServerSentEvent<ChatResponse>;

/** A WHATWG `ReadableStream` of chat events that is also async-iterable (`for await`). */
export type ChatStream = ReadableStream<ChatStreamEvent> & AsyncIterable<ChatStreamEvent>;

/**
 * Result of `completions(request)` (rule 1): the literal `stream: true` gives a stream, `false` or absent gives a
 * `ChatResponse`, and a request whose `stream` is a plain `boolean` (or a broad `ChatRequest`) gives the union.
 */
export type CompletionResult<T extends ChatRequest> = T extends { stream: true }
  ? ChatStream
  : // `model` keeps the target from being a "weak" all-optional type, which a request without `stream` would fail.
    T extends { stream?: false | undefined; model: string }
    ? ChatResponse
    : ChatStream | ChatResponse;
