/**
 * The SSE edge cases of the reference table (docs: shared/reference/chat-client.md §3), fed to the stream layer
 * as recorded bytes. Every wire goes through `parseAtEveryBoundary`, which also cuts it at every byte boundary
 * and into one-byte pieces and requires the same outcome each time.
 */
import { describe, expect, it } from "vitest";
import { toChatStream } from "../src/chat-stream.js";
import { DecodeError, EventSizeLimitError, StreamError } from "../src/errors.js";
import { parseAtEveryBoundary, readAll, sourceOf, utf8 } from "./support/byte-streams.js";

const text = (outcome: { events: { data: { choices: { delta?: { content?: string } }[] } }[] }) =>
  outcome.events.map((e) => e.data.choices[0]?.delta?.content);
const c = (content: string) => JSON.stringify({ id: "x", object: "chat.completion.chunk", created: 1, choices: [{ index: 0, delta: { content } }] });

/** A recorded, realistic stream that mixes most features at once. */
const RECORDED = [
  "\uFEFF: keep-alive\r\n\r\n",
  `id: 7\r\nretry: 1500\r\ndata: ${c("Привет")}\r\n\r\n`,
  `data:${c("世界 🌍")}\n\n`,
  `: OPENROUTER PROCESSING\n\n`,
  `data: {"id":"x","object":"chat.completion.chunk","created":1,\ndata: "choices":[{"index":0,"delta":{"content":"a\u2028b\u2029c"}}]}\r\r`,
  `data: {"id":"x","object":"chat.completion.chunk","created":1,"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}\n\n`,
  "data: [DONE]\n\n",
  `data: ${c("after done")}\n\n`,
].join("");

describe("SSE edge cases, at every byte boundary", () => {
  it("a recorded stream mixing BOM, CRLF, CR, comments, ids, multi-line data and UTF-8 parses the same at every split", async () => {
    const outcome = await parseAtEveryBoundary(RECORDED);
    expect(outcome.error).toBeUndefined();
    expect(text(outcome)).toEqual(["Привет", "世界 🌍", "a\u2028b\u2029c", undefined]);
    expect(outcome.events.map((e) => [e.event, e.id, e.retry])).toEqual([
      ["message", "7", 1500],
      ["message", "7", 1500],
      ["message", "7", 1500],
      ["message", "7", 1500],
    ]);
    expect(outcome.events[3].data.usage).toEqual({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
  });

  it("#1 [DONE] ends the stream: nothing after it is delivered", async () => {
    const outcome = await parseAtEveryBoundary(`data: ${c("a")}\n\ndata: [DONE]\n\ndata: ${c("b")}\n\ndata: not json\n\n`);
    expect(outcome).toEqual({ events: [expect.objectContaining({ data: expect.any(Object) })] });
    expect(text(outcome)).toEqual(["a"]);
  });

  it("#1 [DONE] cancels a source that never closes, so the connection is released", async () => {
    const source = sourceOf([utf8(`data: ${c("a")}\n\ndata: [DONE]\n\n`)], { keepOpen: true });
    const outcome = await readAll(toChatStream(source.stream));
    expect(text(outcome)).toEqual(["a"]);
    await source.cancelled; // would time out the test if [DONE] did not cancel
  });

  it("#1 [DONE] with surrounding spaces (data:[DONE] and 'data: [DONE] ') also ends the stream", async () => {
    expect(text(await parseAtEveryBoundary(`data:${c("a")}\n\ndata:[DONE]\n\n`))).toEqual(["a"]);
    const spaced = await parseAtEveryBoundary(`data: ${c("a")}\n\ndata: [DONE] \n\ndata: ${c("b")}\n\n`);
    expect(spaced.error).toBeUndefined();
    expect(text(spaced)).toEqual(["a"]);
  });

  it("#2 comments and keep-alives are ignored", async () => {
    const outcome = await parseAtEveryBoundary(`: ping\n\n:\n: OPENROUTER PROCESSING\ndata: ${c("a")}\n\n: ping\n\ndata: [DONE]\n\n`);
    expect(text(outcome)).toEqual(["a"]);
  });

  it("#2 an empty data line (`data:`, `data: `) is a keep-alive, not an event to decode; its id still counts", async () => {
    const outcome = await parseAtEveryBoundary(`data: ${c("a")}\n\ndata:\n\nid: 9\ndata: \n\ndata: ${c("b")}\n\ndata: [DONE]\n\n`);
    expect(outcome.error).toBeUndefined();
    expect(text(outcome)).toEqual(["a", "b"]);
    expect(outcome.events.map((e) => e.id)).toEqual([undefined, "9"]);
  });

  it("cancel() after the stream failed resolves (the deadline recipe's timer firing late): no unhandled rejection", async () => {
    const stream = toChatStream(sourceOf([utf8(`data: ${c("a")}\n\nevent: error\ndata: {"error":{"message":"overloaded"}}\n\n`)]).stream);
    const outcome = await readAll(stream);
    expect(outcome.error).toBeInstanceOf(StreamError);
    await expect(stream.cancel()).resolves.toBeUndefined();
  });

  it("#3 CRLF line endings, with CR and LF in different chunks, give no phantom event", async () => {
    const outcome = await parseAtEveryBoundary(`data: ${c("a")}\r\n\r\ndata: ${c("b")}\r\n\r\ndata: [DONE]\r\n\r\n`);
    expect(text(outcome)).toEqual(["a", "b"]);
  });

  it("#3 mixed endings (\\n\\r\\n) are handled", async () => {
    expect(text(await parseAtEveryBoundary(`data: ${c("a")}\n\r\ndata: ${c("b")}\r\n\n`))).toEqual(["a", "b"]);
  });

  it("#4 bare CR line endings are supported", async () => {
    expect(text(await parseAtEveryBoundary(`data: ${c("a")}\r\rdata: ${c("b")}\r\rdata: [DONE]\r\r`))).toEqual(["a", "b"]);
  });

  it("#4 bare CR: an event whose blank line ends the bytes received so far is dispatched at once, [DONE] included", async () => {
    const source = sourceOf([utf8(`data: ${c("a")}\r\r`), utf8("data: [DONE]\r\r")], { keepOpen: true });
    const outcome = await readAll(toChatStream(source.stream));
    expect(text(outcome)).toEqual(["a"]);
    await source.cancelled; // would time out the test if the final CR waited for a possible LF
    const crlf = sourceOf([utf8(`data: ${c("b")}\r\n\r\ndata: [DONE]\r\n\r`)], { keepOpen: true });
    expect(text(await readAll(toChatStream(crlf.stream)))).toEqual(["b"]);
    await crlf.cancelled;
  });

  it("#5 multi-line data is joined with \\n before JSON parsing", async () => {
    const outcome = await parseAtEveryBoundary(`data: {"id":"x","object":"o","created":1,\ndata: "choices":[{"delta":{"content":"ok"}}]}\n\n`);
    expect(text(outcome)).toEqual(["ok"]);
  });

  it("#6 an event split across many packets is buffered until its blank line", async () => {
    // parseAtEveryBoundary already includes one-byte packets; this checks a long event in particular.
    const long = "x".repeat(5000);
    expect(text(await parseAtEveryBoundary(`data: ${c(long)}\n\n`))).toEqual([long]);
  });

  it("#7 multi-byte UTF-8 (2, 3 and 4 bytes) split at every offset decodes intact", async () => {
    const outcome = await parseAtEveryBoundary(`data: ${c("é ж 中 ✓ 😀 𝄞")}\n\n`);
    expect(text(outcome)).toEqual(["é ж 中 ✓ 😀 𝄞"]);
  });

  it("#8 U+2028 / U+2029 inside JSON strings are not line breaks", async () => {
    expect(text(await parseAtEveryBoundary(`data: ${c("line\u2028sep\u2029para")}\n\n`))).toEqual(["line\u2028sep\u2029para"]);
  });

  it("#9 data: without a space is valid; only one leading space is stripped", async () => {
    expect(text(await parseAtEveryBoundary(`data:${c("a")}\n\n`))).toEqual(["a"]);
    const outcome = await parseAtEveryBoundary(`data:  ${c("b")}\n\n`); // JSON tolerates the kept space
    expect(text(outcome)).toEqual(["b"]);
  });

  it("#10 a data: {\"error\": …} frame errors the stream with the provider's message, after the earlier events", async () => {
    const outcome = await parseAtEveryBoundary(
      `data: ${c("a")}\n\ndata: ${c("b")}\n\ndata: {"error":{"message":"upstream overloaded","type":"server_error","code":"overloaded"}}\n\ndata: ${c("c")}\n\n`,
    );
    expect(text(outcome)).toEqual(["a", "b"]);
    expect(outcome.error).toBeInstanceOf(StreamError);
    expect((outcome.error as StreamError).message).toBe("upstream overloaded");
    expect((outcome.error as StreamError).error).toMatchObject({ type: "server_error", code: "overloaded" });
  });

  it("#10 a data: {\"error\": \"…\"} frame with a plain-string error errors the stream with that message", async () => {
    const outcome = await parseAtEveryBoundary(`data: ${c("a")}\n\ndata: {"error":"model overloaded"}\n\ndata: ${c("b")}\n\ndata: [DONE]\n\n`);
    expect(text(outcome)).toEqual(["a"]);
    expect(outcome.error).toBeInstanceOf(StreamError);
    expect((outcome.error as StreamError).message).toBe("model overloaded");
  });

  it("#10 an event: error frame errors the stream with the provider's message", async () => {
    const outcome = await parseAtEveryBoundary(`data: ${c("a")}\n\nevent: error\ndata: {"message":"rate limited mid-stream"}\n\n`);
    expect(text(outcome)).toEqual(["a"]);
    expect(outcome.error).toBeInstanceOf(StreamError);
    expect((outcome.error as StreamError).message).toBe("rate limited mid-stream");
    expect((outcome.error as StreamError).event).toBe("error");
  });

  it("#11 the usage-only chunk (choices: []) is delivered before [DONE]", async () => {
    const outcome = await parseAtEveryBoundary(
      `data: ${c("a")}\n\ndata: {"id":"x","object":"o","created":1,"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\n\ndata: [DONE]\n\n`,
    );
    expect(outcome.events).toHaveLength(2);
    expect(outcome.events[1].data.choices).toEqual([]);
    expect(outcome.events[1].data.usage.total_tokens).toBe(3);
  });

  it("#12 unknown fields (obfuscation, service_tier) pass through untouched", async () => {
    const outcome = await parseAtEveryBoundary(`data: {"id":"x","object":"o","created":1,"choices":[],"obfuscation":"q9Z","service_tier":"default"}\n\n`);
    expect(outcome.events[0].data).toMatchObject({ obfuscation: "q9Z", service_tier: "default" });
  });

  it("#13 tool_calls deltas arrive as separate chunks, several entries per chunk allowed", async () => {
    const tc = (calls: unknown[]) => JSON.stringify({ id: "x", object: "o", created: 1, choices: [{ index: 0, delta: { tool_calls: calls } }] });
    const outcome = await parseAtEveryBoundary(
      `data: ${tc([{ index: 0, id: "call_a", type: "function", function: { name: "f", arguments: "" } }, { index: 1, id: "call_b", type: "function", function: { name: "g", arguments: "{" } }])}\n\n` +
        `data: ${tc([{ index: 0, function: { arguments: '{"x":1}' } }])}\n\n`,
    );
    expect(outcome.events.map((e) => e.data.choices[0].delta!.tool_calls.length)).toEqual([2, 1]);
  });

  it("#14 a role-only first delta and an empty final delta with finish_reason are normal chunks", async () => {
    const first = JSON.stringify({ id: "x", object: "o", created: 1, choices: [{ index: 0, delta: { role: "assistant", content: "" } }] });
    const last = JSON.stringify({ id: "x", object: "o", created: 1, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
    const outcome = await parseAtEveryBoundary(`data: ${first}\n\ndata: ${last}\n\ndata: [DONE]\n\n`);
    expect(outcome.error).toBeUndefined();
    expect(outcome.events.map((e) => e.data.choices[0].finish_reason ?? null)).toEqual([null, "stop"]);
  });

  it("#15 a final event without its trailing blank line is still delivered (lenient EOF policy)", async () => {
    expect(text(await parseAtEveryBoundary(`data: ${c("a")}\n\ndata: ${c("last")}`))).toEqual(["a", "last"]);
    expect(text(await parseAtEveryBoundary(`data: ${c("a")}\n\ndata: ${c("last")}\n`))).toEqual(["a", "last"]);
    expect(text(await parseAtEveryBoundary(`data: ${c("a")}\r\n\r\ndata: ${c("last")}\r`))).toEqual(["a", "last"]);
  });

  it("#16 a body that ends cleanly without [DONE] closes the stream normally", async () => {
    const outcome = await parseAtEveryBoundary(`data: ${c("a")}\n\n`);
    expect(outcome).toEqual({ events: [expect.anything()] });
  });

  it("#17 a stalled stream (headers, then nothing) can be cancelled by the caller, which cancels the source", async () => {
    const source = sourceOf([utf8(": ping\n\n")], { keepOpen: true });
    const stream = toChatStream(source.stream);
    await stream.cancel("caller gave up");
    expect(await source.cancelled).toBe("caller gave up");
  });

  it("#17 the README's deadline recipe: stream.cancel() while a for-await loop reads ends the loop and cancels the source", async () => {
    const source = sourceOf([utf8(`data: ${c("a")}\n\n`)], { keepOpen: true }); // one event, then a stall
    const stream = toChatStream(source.stream);
    const seen: (string | undefined)[] = [];
    setTimeout(() => void stream.cancel("deadline"), 50);
    for await (const event of stream) seen.push(event.data.choices[0].delta?.content); // ends instead of waiting forever
    expect(seen).toEqual(["a"]);
    expect(await source.cancelled).toBe("deadline");
  });

  it("#20 a leading BOM is stripped", async () => {
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, ...utf8(`data: ${c("a")}\n\n`)]);
    expect(text(await parseAtEveryBoundary(bytes))).toEqual(["a"]);
  });

  it("#21 an unterminated event beyond maxEventSize errors the stream instead of buffering without bound", async () => {
    const source = sourceOf([utf8(`data: ${c("a")}\n\n`), utf8(`data: "${"y".repeat(600)}`), utf8("y".repeat(600))], { keepOpen: true });
    const outcome = await readAll(toChatStream(source.stream, { maxEventSize: 1000 }));
    expect(text(outcome)).toEqual(["a"]);
    expect(outcome.error).toBeInstanceOf(EventSizeLimitError);
    expect((outcome.error as Error).message).toContain("maxEventSize (1000");
    await source.cancelled;
  });

  it("#21 a complete event larger than maxEventSize is rejected even when it arrives in one piece", async () => {
    const outcome = await readAll(toChatStream(sourceOf([utf8(`data: ${c("z".repeat(2000))}\n\n`)]).stream, { maxEventSize: 1000 }));
    expect(outcome.events).toEqual([]);
    expect(outcome.error).toBeInstanceOf(EventSizeLimitError);
  });
});

describe("SSE field rules", () => {
  it("event names, id persistence and retry are reported on each event", async () => {
    const outcome = await parseAtEveryBoundary(`event: delta\nid: 1\ndata: ${c("a")}\n\ndata: ${c("b")}\n\nid: 2\nretry: 20\ndata: ${c("c")}\n\n`);
    expect(outcome.events.map((e) => [e.event, e.id, e.retry])).toEqual([
      ["delta", "1", undefined],
      ["message", "1", undefined],
      ["message", "2", 20],
    ]);
  });

  it("an id containing NUL is ignored, a non-numeric retry is ignored, unknown fields are ignored", async () => {
    const outcome = await parseAtEveryBoundary(`id: 1\ndata: ${c("a")}\n\nid: bad\u0000id\nretry: 1s\nfoo: bar\nDATA: ignored\ndata: ${c("b")}\n\n`);
    expect(outcome.events.map((e) => [e.id, e.retry])).toEqual([
      ["1", undefined],
      ["1", undefined],
    ]);
    expect(text(outcome)).toEqual(["a", "b"]);
  });

  it("an event with no data lines is not dispatched", async () => {
    expect(text(await parseAtEveryBoundary(`event: ping\nid: 5\n\ndata: ${c("a")}\n\n`))).toEqual(["a"]);
  });

  it("an error frame in plain text is the provider's StreamError with its text as the message, not a DecodeError", async () => {
    const outcome = await parseAtEveryBoundary(`data: ${c("a")}\n\nevent: error\ndata: upstream timed out\n\n`);
    expect(text(outcome)).toEqual(["a"]);
    expect(outcome.error).toBeInstanceOf(StreamError);
    expect((outcome.error as StreamError).message).toBe("upstream timed out");
  });

  it("malformed JSON errors the stream with DecodeError and nothing after it is delivered", async () => {
    const outcome = await parseAtEveryBoundary(`data: ${c("a")}\n\ndata: {"id": nope}\n\ndata: ${c("b")}\n\n`);
    expect(text(outcome)).toEqual(["a"]);
    expect(outcome.error).toBeInstanceOf(DecodeError);
    expect((outcome.error as DecodeError).text).toBe('{"id": nope}');
    expect((outcome.error as DecodeError).cause).toBeInstanceOf(SyntaxError);
  });

  it("the result is a ReadableStream (getReader, tee) as well as async-iterable", async () => {
    const stream = toChatStream(sourceOf([utf8(`data: ${c("a")}\n\ndata: ${c("b")}\n\ndata: [DONE]\n\n`)]).stream);
    expect(stream).toBeInstanceOf(ReadableStream);
    const [left, right] = stream.tee();
    const reader = left.getReader();
    expect((await reader.read()).value?.data.choices[0].delta?.content).toBe("a");
    expect(text(await readAll(right as AsyncIterable<never>))).toEqual(["a", "b"]);
  });

  it("breaking out of for-await cancels the source", async () => {
    const source = sourceOf([utf8(`data: ${c("a")}\n\ndata: ${c("b")}\n\n`)], { keepOpen: true });
    for await (const event of toChatStream(source.stream)) {
      expect(event.data.choices[0].delta?.content).toBe("a");
      break;
    }
    await source.cancelled;
  });
});
