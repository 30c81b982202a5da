/**
 * Every error the library raises on purpose. All extend {@link ChatClientError}, so one `instanceof` catches
 * them; the subclasses say what went wrong and carry what a caller needs to react (status, body, cause).
 * Nothing is retried: each error reaches the caller the first time it happens.
 */

/** Base class of every error raised by this library. */
export class ChatClientError extends Error {
  override name = "ChatClientError";
}

/** The request never got a response: DNS failure, connection refused or reset, TLS failure, socket cut mid-body. */
export class NetworkError extends ChatClientError {
  override name = "NetworkError";
  constructor(
    message: string,
    /** The URL that was requested. */
    readonly url: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The fetcher's `timeout` elapsed before the response was received (for JSON results: before the body was read). */
export class TimeoutError extends ChatClientError {
  override name = "TimeoutError";
  constructor(
    /** The timeout that elapsed, in milliseconds. */
    readonly timeout: number,
    readonly method: string,
    readonly url: string,
  ) {
    super(`Request timed out after ${timeout} ms: ${method} ${url}`);
  }
}

/** The shape providers commonly use for an error payload, `{ error: { message, type, param, code } }`. */
export interface ProviderErrorBody {
  message?: string;
  type?: string;
  param?: string | null;
  code?: string | number | null;
  [key: string]: unknown;
}

/** The server answered with a non-2xx status. Raised before any stream exists, in stream and non-stream mode. */
export class HttpStatusError extends ChatClientError {
  override name = "HttpStatusError";
  /** The response status, e.g. 401, 429, 500. */
  readonly status: number;
  /** The response headers. */
  readonly headers: Headers;
  /** The response body: parsed JSON when it was JSON, otherwise the raw text (`""` when empty). */
  readonly body: unknown;
  /** `body.error` when the body has an object there (the usual provider shape), otherwise `undefined`. */
  readonly error: ProviderErrorBody | undefined;
  /** The `x-request-id` response header, which providers ask for in support requests. */
  readonly requestId: string | undefined;
  readonly url: string;

  /**
   * `cause`: why the body is missing or cut (`body` is then what arrived of it, or `""`): the connection broke or the
   * deadline passed while it was read. The status, headers and request id arrived, and they are what a caller acts on.
   */
  constructor(response: Response, body: unknown, url: string, options?: { cause?: unknown }) {
    const error = providerError(body);
    // some providers send the message itself as the error: {"error": "model overloaded"}
    const plain = body !== null && typeof body === "object" ? (body as { error?: unknown }).error : undefined;
    const detail =
      typeof error?.message === "string" && error.message !== "" ? error.message : typeof plain === "string" && plain !== "" ? snippet(plain) : response.statusText || "HTTP error";
    super(`${response.status} ${detail}`, options);
    this.status = response.status;
    this.headers = response.headers;
    this.body = body;
    this.error = error;
    this.requestId = response.headers.get("x-request-id") ?? undefined;
    this.url = url;
  }
}

/** A response body or a stream event could not be decoded (invalid JSON, missing body). */
export class DecodeError extends ChatClientError {
  override name = "DecodeError";
  constructor(
    message: string,
    /** The text that failed to decode, cut to 1,000 characters. */
    readonly text?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** One stream event grew beyond the configured `maxEventSize`; the stream stops instead of buffering without bound. */
export class EventSizeLimitError extends DecodeError {
  override name = "EventSizeLimitError";
  constructor(readonly maxEventSize: number) {
    super(`A server-sent event exceeded maxEventSize (${maxEventSize} characters); raise ApiMetadata.maxEventSize if such events are expected`);
  }
}

/** Stream mode got a 2xx response that is not `text/event-stream` (e.g. a provider that ignores `stream: true`). */
export class ContentTypeError extends ChatClientError {
  override name = "ContentTypeError";
  constructor(
    /** The `content-type` the server sent (`""` if none). */
    readonly contentType: string,
    /** The response body: parsed JSON when it was JSON, otherwise the raw text. */
    readonly body: unknown,
  ) {
    super(`Expected a text/event-stream response for stream: true, got content-type "${contentType}"`);
  }
}

/** The provider sent an error frame mid-stream (`event: error` or `data: {"error": …}`) after a 200 response. */
export class StreamError extends ChatClientError {
  override name = "StreamError";
  constructor(
    message: string,
    /** `data.error` when it is an object, otherwise the whole parsed `data`. */
    readonly error: unknown,
    /** The SSE event name of the frame (`"message"` when none was sent). */
    readonly event: string,
  ) {
    super(message);
  }
}

/** Reads the `{ error: {...} }` object out of a parsed error body, if it has one. */
export function providerError(body: unknown): ProviderErrorBody | undefined {
  if (body === null || typeof body !== "object") return undefined;
  const error = (body as { error?: unknown }).error;
  return error !== null && typeof error === "object" ? (error as ProviderErrorBody) : undefined;
}

/** Cuts long text for error fields so a huge bad body does not end up in logs whole. */
export function snippet(text: string): string {
  return text.length > 1000 ? `${text.slice(0, 1000)}…` : text;
}
