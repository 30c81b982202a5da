/** @gov/chat-client: a Chat Completions client (JSON and streaming) on a small fetch-based fetcher. */
export { Provider } from "./provider.js";
export { ChatClient, type ApiMetadata } from "./chat-client.js";
export {
  Fetcher,
  resolveURL,
  type FetcherOptions,
  type FetcherInterceptors,
  type FetchExchange,
  type FetchRequest,
  type Interceptor,
  type ResultExtractor,
} from "./fetcher.js";
export { chatJsonResultExtractor, jsonResultExtractor, streamResultExtractor, createStreamResultExtractor } from "./result-extractors.js";
export { toChatStream, DEFAULT_MAX_EVENT_SIZE, type ChatStreamOptions } from "./chat-stream.js";
export { collectChatResponse, ChatResponseAccumulator } from "./collect-chat-response.js";
export {
  ChatClientError,
  NetworkError,
  TimeoutError,
  HttpStatusError,
  DecodeError,
  EventSizeLimitError,
  ContentTypeError,
  StreamError,
  type ProviderErrorBody,
} from "./errors.js";
export type {
  BaseURLCapable,
  ProviderOptions,
  ChatRequest,
  Message,
  ChatTool,
  ChatToolFunction,
  ChatToolChoice,
  ChatResponse,
  Choice,
  Usage,
  JsonServerSentEvent,
  ChatStreamEvent,
  ChatStream,
  CompletionResult,
} from "./types.js";
