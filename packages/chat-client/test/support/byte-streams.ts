/** Helpers that feed recorded SSE bytes to `toChatStream` in chosen pieces, and read what comes out. */
import { toChatStream, type ChatStreamOptions } from "../../src/chat-stream.js";
import type { ChatStreamEvent } from "../../src/types.js";

export const utf8 = (text: string) => new TextEncoder().encode(text);

export interface Source {
  stream: ReadableStream<Uint8Array>;
  /** Resolves with the reason when the consumer side cancelled the source. */
  cancelled: Promise<unknown>;
}

/** A byte source that yields `chunks` and then closes, or stays open forever with `keepOpen`. */
export function sourceOf(chunks: Uint8Array[], options: { keepOpen?: boolean } = {}): Source {
  let onCancel!: (reason: unknown) => void;
  const cancelled = new Promise<unknown>((resolve) => (onCancel = resolve));
  let i = 0;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (i < chunks.length) controller.enqueue(chunks[i++]);
        else if (!options.keepOpen) controller.close();
        else return new Promise(() => {}); // never settles: a server that keeps the socket open
      },
      cancel: (reason) => onCancel(reason),
    },
    { highWaterMark: 0 },
  );
  return { stream, cancelled };
}

export interface Outcome {
  events: ChatStreamEvent[];
  error?: unknown;
}

/** Reads a chat stream to its end, collecting the events and the error (if any) it ended with. */
export async function readAll(stream: AsyncIterable<ChatStreamEvent>): Promise<Outcome> {
  const events: ChatStreamEvent[] = [];
  try {
    for await (const event of stream) events.push(event);
    return { events };
  } catch (error) {
    return { events, error };
  }
}

/** Parses `bytes` delivered in the given pieces. */
export function parsePieces(pieces: Uint8Array[], options?: ChatStreamOptions): Promise<Outcome> {
  return readAll(toChatStream(sourceOf(pieces).stream, options));
}

/** Every way to cut `bytes` once (`[0,i)`, `[i,n)` for each i), plus the all-one-byte split. */
export function everySplit(bytes: Uint8Array): Uint8Array[][] {
  const splits: Uint8Array[][] = [];
  for (let i = 0; i <= bytes.length; i++) splits.push([bytes.subarray(0, i), bytes.subarray(i)]);
  splits.push(Array.from(bytes, (b) => Uint8Array.of(b)));
  return splits;
}

/** A plain comparable view of an outcome (error class name and message instead of the object). */
export function summary(outcome: Outcome): { events: ChatStreamEvent[]; error?: string } {
  const error = outcome.error as Error | undefined;
  return error ? { events: outcome.events, error: `${error.name}: ${error.message}` } : { events: outcome.events };
}

/**
 * Parses `wire` whole, then at every byte boundary and one byte at a time, and asserts every split gives the
 * same outcome as the whole; returns that outcome. This is the chunk-boundary invariance property.
 */
export async function parseAtEveryBoundary(wire: string | Uint8Array, options?: ChatStreamOptions): Promise<Outcome> {
  const bytes = typeof wire === "string" ? utf8(wire) : wire;
  const whole = await parsePieces([bytes], options);
  const expected = JSON.stringify(summary(whole));
  for (const pieces of everySplit(bytes)) {
    const got = JSON.stringify(summary(await parsePieces(pieces, options)));
    if (got !== expected) {
      const at = pieces.length === 2 ? `split at byte ${pieces[0].length}` : "one-byte pieces";
      throw new Error(`${at} changed the outcome:\n  whole: ${expected}\n  split: ${got}`);
    }
  }
  return whole;
}
