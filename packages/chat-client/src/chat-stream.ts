/**
 * Turns an SSE response body into a stream of parsed chat events.
 *
 * One `ReadableStream` does all the work in its `pull`: read a network chunk, decode it with one streaming
 * `TextDecoder`, feed it to eventsource-parser, and enqueue each event synchronously from the parser callback.
 * No `pipeThrough` chain, so there is no promise per event beyond the consumer's own `read()`.
 */
import { createParser, type EventSourceMessage, type ParseError } from "eventsource-parser";
import { DecodeError, EventSizeLimitError, StreamError, providerError, snippet } from "./errors.js";
import { toNetworkError } from "./response-body.js";
import type { ChatResponse, ChatStream, ChatStreamEvent } from "./types.js";

/** Default cap on one event (and on buffered, not yet terminated input): 16 Mi characters. */
export const DEFAULT_MAX_EVENT_SIZE = 16 * 1024 * 1024;

export interface ChatStreamOptions {
  /** Largest event, in characters, before the stream errors with {@link EventSizeLimitError}. */
  maxEventSize?: number;
  /** Used in the NetworkError of a connection that breaks mid-stream. */
  url?: string;
  /** The caller's signal: a read failing with its abort reason rejects with that reason as it is. */
  signal?: AbortSignal;
}

/**
 * Wraps an SSE body. `data: [DONE]` closes the result at once and cancels `body` (so the connection is released
 * even if the server keeps it open); `event: error` or a `{"error": …}` payload errors it with {@link StreamError};
 * invalid JSON errors it with {@link DecodeError}. A last event without its blank line is still delivered at EOF.
 */
export function toChatStream(body: ReadableStream<Uint8Array>, options: ChatStreamOptions = {}): ChatStream {
  const maxEventSize = options.maxEventSize ?? DEFAULT_MAX_EVENT_SIZE;
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let controller!: ReadableStreamDefaultController<ChatStreamEvent>;
  let finished = false; // after [DONE], an error or a cancel, later events are dropped
  let delivered = false;
  let lastId: string | undefined;
  let retry: number | undefined;
  let pendingError: { error: unknown } | undefined;

  const release = (reason?: unknown) => void reader.cancel(reason).catch(() => {});
  const finish = () => {
    finished = true;
    controller.close();
    release();
  };
  const fail = (error: unknown) => {
    finished = true;
    release(error);
    // `error()` drops queued events; let the consumer read the events that came before the failure first.
    if ((controller.desiredSize ?? 0) >= 1) controller.error(error);
    else pendingError = { error };
  };

  const parser = createParser({
    maxBufferSize: maxEventSize,
    onRetry: (ms: number) => (retry = ms),
    onError: (error: ParseError) => {
      // Unknown fields and bad `retry` values are ignored, as the SSE spec says; only the size cap is fatal.
      if (error.type === "max-buffer-size-exceeded" && !finished) fail(new EventSizeLimitError(maxEventSize));
    },
    onEvent: (message: EventSourceMessage) => {
      if (finished) return;
      if (message.id !== undefined) lastId = message.id;
      const data = message.data;
      // an event whose data is empty is not dispatched (the SSE spec): a keep-alive `data:` line, not JSON to decode
      if (data === "") return;
      if (data.length > maxEventSize) return fail(new EventSizeLimitError(maxEventSize));
      if (isDone(data)) return finish();
      const event = message.event ?? "message";
      let parsed: unknown;
      try {
        parsed = JSON.parse(data);
      } catch (cause) {
        // an error frame in plain text ("upstream timed out") is still the provider's error, not a decoding failure
        if (event === "error") return fail(streamError(data, event));
        return fail(new DecodeError("Stream event data is not valid JSON", snippet(data), { cause }));
      }
      if (event === "error" || hasError(parsed)) return fail(streamError(parsed, event));
      controller.enqueue({ event, data: parsed as ChatResponse, id: lastId, retry });
      delivered = true;
    },
  });

  // eventsource-parser holds back a CR that ends its input (it may be the first half of a CRLF), so a bare-CR server's
  // last event, [DONE] included, would wait for bytes that may never come. So line endings are normalised to LF here:
  // a CR that ends a piece ends its line at once, and the LF of that CRLF is dropped if the next piece starts with it.
  let skipLF = false;
  const feed = (text: string) => {
    if (text === "") return;
    if (skipLF) {
      skipLF = false;
      if (text.charCodeAt(0) === 10) text = text.slice(1);
    }
    if (text.indexOf("\r") !== -1) {
      skipLF = text.charCodeAt(text.length - 1) === 13;
      text = text.replace(/\r\n?/g, "\n");
    }
    if (text !== "") parser.feed(text);
  };

  const endOfBody = () => {
    feed(decoder.decode());
    // The last event may lack its blank line; dispatch it rather than lose e.g. the final finish_reason.
    if (!finished) parser.feed("\n\n");
    if (!finished) {
      finished = true;
      controller.close();
    }
  };

  const stream = new ReadableStream<ChatStreamEvent>({
    start(c) {
      controller = c;
    },
    async pull() {
      if (pendingError) return controller.error(pendingError.error);
      // Keep reading until this pull delivered something: a pull that enqueues nothing is not called again.
      delivered = false;
      while (!finished && !delivered) {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (error) {
          // after the headers, a failed read means the connection broke mid-stream (or the caller aborted)
          if (!finished) fail(toNetworkError(error, options.url ?? "", options.signal, "Connection lost while reading the stream"));
          return;
        }
        if (finished) return;
        if (chunk.done) return endOfBody();
        feed(decoder.decode(chunk.value, { stream: true }));
      }
    },
    cancel(reason) {
      finished = true;
      // The caller is done with the stream (a `break`, `reader.cancel()`): a body that already failed (the connection
      // dropped while the caller was busy with an event) has nothing left to cancel, and its platform TypeError
      // ("terminated") must not come out of the caller's `break`.
      return reader.cancel(reason).catch(() => undefined);
    },
  });
  // `stream.cancel()` while a `for await` loop holds the stream (the README's deadline recipe) would reject with "locked"
  // and leave the loop waiting on the network: cancelled then, it stops the body and ends the loop after the events
  // already parsed. Unlocked, it is the stream's own cancel.
  const cancelLocked = (reason?: unknown): Promise<void> => {
    if (!finished) {
      finished = true;
      release(reason);
      try {
        controller.close();
      } catch {
        // already closed or errored
      }
    }
    return Promise.resolve();
  };
  // Unlocked after the stream failed (the loop ended on the error, then the recipe's timer fires), the stream's own
  // cancel rejects with that error, which the caller already handled: an unhandled rejection that ended the process.
  // A stream that has ended has nothing left to cancel.
  const ownCancel = stream.cancel.bind(stream);
  Object.defineProperty(stream, "cancel", { value: (reason?: unknown) => (stream.locked ? cancelLocked(reason) : ownCancel(reason).catch(() => undefined)) });
  return asyncIterable(stream);
}

/** `[DONE]`, tolerating surrounding whitespace some proxies add. */
function isDone(data: string): boolean {
  return data === "[DONE]" || (data.length < 32 && data.trim() === "[DONE]");
}

/** A `{"error": …}` frame: an error object, or a plain message some providers send instead ({"error": "overloaded"}). */
export function hasError(parsed: unknown): boolean {
  return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) && Boolean((parsed as { error?: unknown }).error);
}

export function streamError(parsed: unknown, event: string): StreamError {
  const error = providerError(parsed) ?? parsed;
  const plain = parsed !== null && typeof parsed === "object" ? (parsed as { error?: unknown }).error : undefined;
  const message =
    (error as { message?: unknown } | null)?.message ??
    (parsed as { message?: unknown } | null)?.message ??
    (typeof plain === "string" && plain !== "" ? snippet(plain) : typeof parsed === "string" ? parsed : undefined);
  return new StreamError(typeof message === "string" ? message : `Provider sent an error event: ${snippet(JSON.stringify(parsed))}`, error, event);
}


/**
 * Node ≥18 and current browsers make `ReadableStream` async-iterable natively. Where a runtime does not, add
 * the iterator to this one instance (never to the global prototype).
 */
function asyncIterable<T>(stream: ReadableStream<T>): ReadableStream<T> & AsyncIterable<T> {
  const candidate = stream as ReadableStream<T> & Partial<AsyncIterable<T>>;
  if (typeof candidate[Symbol.asyncIterator] === "function") return candidate as ReadableStream<T> & AsyncIterable<T>;
  Object.defineProperty(stream, Symbol.asyncIterator, {
    value(): AsyncIterator<T> {
      const reader = stream.getReader();
      return {
        async next() {
          const result = await reader.read();
          if (result.done) reader.releaseLock();
          return result.done ? { done: true, value: undefined } : { done: false, value: result.value };
        },
        async return() {
          await reader.cancel();
          reader.releaseLock();
          return { done: true, value: undefined };
        },
      };
    },
  });
  return stream as ReadableStream<T> & AsyncIterable<T>;
}
