/**
 * `ChatClient`: the Chat Completions API on top of a {@link Fetcher}.
 *
 * Upstream builds this with decorators (`@api('chat')`, `@post('/completions')`). Here the same metadata is
 * plain data: class-level `{ basePath: 'chat' }`, overridden by the instance's `apiMetadata`, merged and frozen
 * on the first call (later edits to `apiMetadata` have no effect), and `beforeExecute(exchange)` picks the
 * result extractor just as the decorator runtime's lifecycle hook does.
 */
import { chatJsonResultExtractor, createStreamResultExtractor, streamResultExtractor } from "./result-extractors.js";
import type { FetchExchange, Fetcher, ResultExtractor } from "./fetcher.js";
import type { ChatRequest, CompletionResult } from "./types.js";

/** Per-client settings, fixed at the first call. */
export interface ApiMetadata {
  /** Path prefix of the API; `chat` for this client. */
  basePath?: string;
  /** The fetcher to send requests with: its base URL, headers, timeout and interceptors all apply. */
  fetcher?: Fetcher;
  /** Extra headers for this client's requests, over the fetcher's own. */
  headers?: Record<string, string>;
  /** Overrides the fetcher's timeout for this client's requests (milliseconds). */
  timeout?: number;
  /** Largest stream event in characters before the stream errors; 16 Mi by default. */
  maxEventSize?: number;
}

/** The class-level metadata (upstream: `@api('chat')`). */
const CHAT_API_METADATA: Readonly<ApiMetadata> = Object.freeze({ basePath: "chat" });

interface ResolvedApi {
  readonly fetcher: Fetcher;
  readonly completionsPath: string;
  readonly headers: Record<string, string> | undefined;
  readonly timeout: number | undefined;
  readonly streamExtractor: ResultExtractor;
}

export class ChatClient {
  #api: ResolvedApi | undefined;

  /** `apiMetadata` is read once, on the first call; set everything before that. */
  constructor(readonly apiMetadata?: ApiMetadata) {}

  /**
   * `POST {baseURL}/chat/completions` with `chatRequest` as the JSON body, exactly as given. Resolves to a
   * `ChatResponse`, or to a `ChatStream` when `stream` is true (see {@link CompletionResult} for the types).
   */
  async completions<T extends ChatRequest>(chatRequest: T): Promise<CompletionResult<T>> {
    const api = (this.#api ??= resolveApi(this.apiMetadata));
    const exchange = api.fetcher.createExchange(
      { url: api.completionsPath, method: "POST", headers: api.headers ?? {}, body: chatRequest, timeout: api.timeout },
      chatJsonResultExtractor,
    );
    await this.beforeExecute(exchange);
    return (await api.fetcher.exchange(exchange)) as CompletionResult<T>;
  }

  /** Lifecycle hook run before the interceptors: a truthy `request.body.stream` selects the event-stream extractor. */
  beforeExecute(exchange: FetchExchange): void | Promise<void> {
    const body = exchange.request.body as ChatRequest | undefined;
    if (body?.stream) exchange.resultExtractor = this.#api?.streamExtractor ?? streamResultExtractor;
  }
}

function resolveApi(instance: ApiMetadata | undefined): ResolvedApi {
  const merged: ApiMetadata = { ...CHAT_API_METADATA, ...instance };
  if (!merged.fetcher) {
    throw new TypeError("ChatClient has no fetcher: use new Provider({ baseURL, apiKey }).chat or new ChatClient({ fetcher })");
  }
  return Object.freeze({
    fetcher: merged.fetcher,
    completionsPath: joinPath(merged.basePath ?? "", "completions"),
    headers: merged.headers ? { ...merged.headers } : undefined,
    timeout: merged.timeout,
    streamExtractor: merged.maxEventSize === undefined ? streamResultExtractor : createStreamResultExtractor({ maxEventSize: merged.maxEventSize }),
  });
}

function joinPath(basePath: string, path: string): string {
  const base = basePath.replace(/^\/+|\/+$/g, "");
  return base === "" ? path : `${base}/${path}`;
}
