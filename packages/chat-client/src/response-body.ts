/** Reading response bodies and turning platform failures into the library's errors. */
import { DecodeError, NetworkError, snippet } from "./errors.js";

/**
 * Maps a failure of `fetch` or of a body read. A caller's own abort keeps its reason, whatever its class (the caller
 * chose it; a reason that is a TypeError is no broken connection); everything the platform throws for a broken
 * connection becomes a {@link NetworkError}, worded by `what` (default: the request failed).
 */
export function toNetworkError(error: unknown, url: string, signal?: AbortSignal, what = `Request to ${url} failed`): unknown {
  if (signal?.aborted) return signal.reason;
  // A connection's failure comes as a TypeError with its cause (the socket's error: "fetch failed", "terminated"); one
  // without a cause, or caused by a URL that does not parse, is fetch refusing to build the request (an invalid header
  // name, a baseURL without its scheme): the caller's mistake, the same on every call — thrown as it is, not as a
  // NetworkError that callers retry.
  if (error instanceof TypeError) {
    const cause = (error as { cause?: { code?: unknown } }).cause;
    if (cause === undefined || cause.code === "ERR_INVALID_URL") return error;
  }
  if (error instanceof TypeError) {
    const cause = (error as { cause?: { message?: string } }).cause;
    const detail = cause?.message ? `${error.message}: ${cause.message}` : error.message;
    return new NetworkError(`${what} (${detail})`, url, { cause: error });
  }
  return error;
}

/** Reads the whole body as text; connection failures become {@link NetworkError}. */
export async function readText(response: Response, url: string, signal?: AbortSignal): Promise<string> {
  try {
    return await response.text();
  } catch (error) {
    throw toNetworkError(error, url, signal);
  }
}

/**
 * Most of an error body that is kept (bytes): enough for any provider's error, a proxy's HTML page or a stack trace;
 * a server that sends more (or never stops) has its body cut here instead of filling the client's memory.
 */
export const ERROR_BODY_LIMIT = 1024 * 1024;

/**
 * Most of a JSON result that is read (bytes): far above any chat completion, so that only a server that never stops
 * sending meets it — the call then fails with a {@link DecodeError} instead of filling the client's memory.
 */
export const RESULT_BODY_LIMIT = 64 * 1024 * 1024;

/** Reads a JSON result: the parsed value, or {@link DecodeError} when it is not JSON or over {@link RESULT_BODY_LIMIT}. */
export async function readJsonResult(response: Response, url: string, signal?: AbortSignal): Promise<unknown> {
  const { text, cut } = await readTextUpTo(response, url, RESULT_BODY_LIMIT, signal);
  if (cut) {
    throw new DecodeError(`Response body is over ${RESULT_BODY_LIMIT} bytes (the rest was not read): not a chat completion`, snippet(text));
  }
  return parseJson(text, "Response body");
}

/** Reads the body as text up to `limit` bytes; the rest is not read (the body is cancelled, and `cut` says so). */
async function readTextUpTo(response: Response, url: string, limit: number, signal?: AbortSignal): Promise<{ text: string; cut: boolean }> {
  if (!response.body) return { text: await readText(response, url, signal), cut: false };
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { text: text + decoder.decode(), cut: false };
      const room = limit - bytes;
      bytes += value.byteLength;
      if (value.byteLength > room) {
        text += decoder.decode(value.subarray(0, room)); // a character cut at the limit shows as U+FFFD
        await reader.cancel().catch(() => {});
        return { text, cut: true };
      }
      text += decoder.decode(value, { stream: true });
    }
  } catch (error) {
    throw toNetworkError(error, url, signal);
  } finally {
    reader.releaseLock();
  }
}

/**
 * Reads a body that may or may not be JSON (error bodies): the parsed value when it parses, else the text — at most
 * its first {@link ERROR_BODY_LIMIT} bytes.
 */
export async function readBody(response: Response, url: string, signal?: AbortSignal): Promise<unknown> {
  const { text } = await readTextUpTo(response, url, ERROR_BODY_LIMIT, signal);
  if (text === "") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Parses a body that must be JSON; anything else is a {@link DecodeError}. */
export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new DecodeError(`${what} is not valid JSON`, snippet(text), { cause });
  }
}
