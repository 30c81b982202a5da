/** The two ways a chat call turns its response into a result: one JSON document, or an event stream. */
import { hasError, streamError, toChatStream, type ChatStreamOptions } from "./chat-stream.js";
import { ContentTypeError, DecodeError } from "./errors.js";
import type { FetchExchange, ResultExtractor } from "./fetcher.js";
import { readBody, readJsonResult } from "./response-body.js";
import type { ChatStream } from "./types.js";

/**
 * Where the response came from, for errors: its own URL (after redirects), or, for one a response interceptor or a
 * custom fetch made (`new Response(…)` has none), the URL the request was sent to.
 */
const urlOf = (exchange: FetchExchange): string => exchange.response?.url || exchange.url || "";

/** Reads the body and parses it as JSON ({@link DecodeError} if it is not, or is over 64 MiB). */
export const jsonResultExtractor: ResultExtractor = async (exchange: FetchExchange) => {
  return readJsonResult(exchange.response!, urlOf(exchange), exchange.request.signal);
};

/**
 * The JSON extractor of chat completions: a 200 whose body is an error (`{"error": …}` and no `choices`; some gateways
 * answer so) rejects with {@link StreamError}, as the same payload does in a stream, instead of resolving as an answer
 * whose `choices` are missing.
 */
export const chatJsonResultExtractor: ResultExtractor = async (exchange: FetchExchange) => {
  const result = await jsonResultExtractor(exchange);
  if (hasError(result) && !Array.isArray((result as { choices?: unknown }).choices)) throw streamError(result, "message");
  return result;
};

/**
 * Builds an extractor that returns a {@link ChatStream}. A 2xx response that is not `text/event-stream`
 * rejects with {@link ContentTypeError}, carrying the body it got instead.
 */
export function createStreamResultExtractor(options: Omit<ChatStreamOptions, "url"> = {}): ResultExtractor {
  return async (exchange: FetchExchange): Promise<ChatStream> => {
    const response = exchange.response!;
    const contentType = response.headers.get("content-type") ?? "";
    if (!contentType.toLowerCase().includes("text/event-stream")) {
      throw new ContentTypeError(contentType, await readBody(response, urlOf(exchange), exchange.request.signal));
    }
    if (response.body === null) throw new DecodeError("The event-stream response has no body");
    return toChatStream(response.body, { ...options, url: urlOf(exchange), signal: exchange.request.signal });
  };
}

/** The stream extractor with the default event size cap. */
export const streamResultExtractor: ResultExtractor = createStreamResultExtractor();
