/** Reading response bodies and turning platform failures into the library's errors. */
import { DecodeError, NetworkError, snippet } from "./errors.js";

/**
 * Maps a failure of `fetch` or of a body read. A caller's own abort keeps its reason (the caller chose it);
 * everything the platform throws for a broken connection becomes a {@link NetworkError}.
 */
export function toNetworkError(error: unknown, url: string, signal?: AbortSignal): unknown {
  if (signal?.aborted) return signal.reason;
  if (error instanceof TypeError) {
    const cause = (error as { cause?: { message?: string } }).cause;
    const detail = cause?.message ? `${error.message}: ${cause.message}` : error.message;
    return new NetworkError(`Request to ${url} failed (${detail})`, url, { cause: error });
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

/** Reads a body that may or may not be JSON (error bodies): the parsed value when it parses, else the text. */
export async function readBody(response: Response, url: string, signal?: AbortSignal): Promise<unknown> {
  const text = await readText(response, url, signal);
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
