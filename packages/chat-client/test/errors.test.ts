/** Failure paths against the real loopback server: each reaches the caller as a typed error, once, unretried. */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  ChatClient,
  ChatClientError,
  ContentTypeError,
  DecodeError,
  Fetcher,
  HttpStatusError,
  NetworkError,
  Provider,
  StreamError,
  TimeoutError,
} from "../src/index.js";
import { ERROR_BODY_LIMIT, RESULT_BODY_LIMIT } from "../src/response-body.js";
import { readAll } from "./support/byte-streams.js";
import { chunk, sleep, sse, startLoopbackServer, type LoopbackServer } from "./support/loopback-server.js";

let server: LoopbackServer;
beforeAll(async () => (server = await startLoopbackServer()));
afterAll(() => server.close());
beforeEach(() => (server.requests.length = 0));

const chat = () => new Provider({ baseURL: `${server.origin}/v1`, apiKey: "k" }).chat;
const request = { model: "m", messages: [{ role: "user", content: "hi" }] };

/** A stream that sends `events`, then has its connection cut. */
const cutAfter = (events: string) => async (req: { socket: { destroy(): void } }, res: { writeHead(status: number, headers: Record<string, string>): unknown; write(text: string): unknown }) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.write(events);
  await sleep(30);
  req.socket.destroy();
};

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

const errorBodies = [
  { status: 401, body: { error: { message: "Incorrect API key provided", type: "invalid_request_error", param: null, code: "invalid_api_key" } } },
  { status: 429, body: { error: { message: "Rate limit reached for requests", type: "requests", param: null, code: "rate_limit_exceeded" } } },
  { status: 500, body: { error: { message: "The server had an error while processing your request", type: "server_error", param: null, code: null } } },
];

describe("HTTP status errors", () => {
  for (const { status, body } of errorBodies) {
    for (const stream of [false, true]) {
      it(`${status} with a JSON body rejects with HttpStatusError in ${stream ? "stream" : "non-stream"} mode, without retrying`, async () => {
        server.handle((_req, res) => {
          res.writeHead(status, { "content-type": "application/json", "x-request-id": `req_${status}`, "retry-after": "1" });
          res.end(JSON.stringify(body));
        });
        const error = await rejection(chat().completions({ ...request, stream }));
        expect(error).toBeInstanceOf(HttpStatusError);
        expect(error).toBeInstanceOf(ChatClientError);
        const e = error as HttpStatusError;
        expect(e.status).toBe(status);
        expect(e.body).toEqual(body);
        expect(e.error).toEqual(body.error);
        expect(e.message).toBe(`${status} ${body.error.message}`);
        expect(e.requestId).toBe(`req_${status}`);
        expect(e.headers.get("retry-after")).toBe("1");
        expect(e.url).toBe(`${server.origin}/v1/chat/completions`);
        await sleep(20); // a retry would have arrived by now
        expect(server.requests).toHaveLength(1);
      });
    }
  }

  it("a non-JSON error body is kept as text and the message falls back to the status text", async () => {
    server.handle((_req, res) => res.writeHead(502, "Bad Gateway", { "content-type": "text/html" }).end("<h1>bad gateway</h1>"));
    const error = (await rejection(chat().completions(request))) as HttpStatusError;
    expect(error).toBeInstanceOf(HttpStatusError);
    expect(error.body).toBe("<h1>bad gateway</h1>");
    expect(error.error).toBeUndefined();
    expect(error.message).toBe("502 Bad Gateway");
  });

  it("an error given as a plain string ({\"error\": \"…\"}) is the message; error stays undefined (it is not an object)", async () => {
    server.handle((_req, res) => res.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify({ error: "model overloaded" })));
    const error = (await rejection(chat().completions(request))) as HttpStatusError;
    expect([error.message, error.error, error.body]).toEqual(["503 model overloaded", undefined, { error: "model overloaded" }]);
  });
});

describe("what a hostile server or a bad key cannot do", () => {
  /** The server answers `status` and sends `piece` after `piece` (up to `max` characters) for as long as it is read. */
  const endlessAnswer = (status: number, contentType: string, piece: string, max: number): (() => number) => {
    let sent = 0;
    server.handle((_req, res) => {
      res.writeHead(status, { "content-type": contentType });
      const more = () => {
        while (!res.destroyed && sent < max) {
          sent += piece.length;
          if (!res.write(piece)) return void res.once("drain", more);
        }
        res.end();
      };
      more();
    });
    return () => sent;
  };

  it("an error body that never ends is cut at 1 MiB: the call settles, with the body's beginning", async () => {
    // A server (or a proxy in front of it) that answers 500 and keeps sending: the body was read whole, without end.
    const sent = endlessAnswer(500, "text/plain", "x".repeat(64 * 1024), 64 * 1024 * 1024);
    const error = (await rejection(chat().completions(request))) as HttpStatusError;
    expect(error).toBeInstanceOf(HttpStatusError);
    expect(error.body).toBe("x".repeat(ERROR_BODY_LIMIT));
    expect(sent()).toBeLessThan(16 * 1024 * 1024); // the rest was not read: the body was cancelled
  });

  it("a JSON result that never ends is refused past 64 MiB with DecodeError: the call settles, without reading the rest", async () => {
    const sent = endlessAnswer(200, "application/json", "[" + "1,".repeat(32 * 1024), 4 * RESULT_BODY_LIMIT);
    const error = (await rejection(chat().completions(request))) as DecodeError;
    expect(error).toBeInstanceOf(DecodeError);
    expect(error.message).toBe(`Response body is over ${RESULT_BODY_LIMIT} bytes (the rest was not read): not a chat completion`);
    expect(sent()).toBeLessThan(2 * RESULT_BODY_LIMIT);
  });

  it("an API key with a line break is refused before sending, and the error does not show the key", async () => {
    const provider = new Provider({ baseURL: `${server.origin}/v1`, apiKey: "sk-SECRET123\r\nX-Injected: 1" });
    const error = (await rejection(provider.chat.completions(request))) as Error;
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/^Header "Authorization" holds a character a header cannot carry/);
    expect(error.message).not.toContain("SECRET");
    expect(server.requests).toHaveLength(0);
  });
});

describe("decode and content-type errors", () => {
  it("stream mode with a 200 application/json answer rejects with ContentTypeError carrying the body", async () => {
    server.handle((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: "x", choices: [] })));
    const error = (await rejection(chat().completions({ ...request, stream: true }))) as ContentTypeError;
    expect(error).toBeInstanceOf(ContentTypeError);
    expect(error.contentType).toBe("application/json");
    expect(error.body).toEqual({ id: "x", choices: [] });
    expect(error.message).toContain("text/event-stream");
  });

  it("a non-stream 200 whose body is not JSON rejects with DecodeError", async () => {
    server.handle((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end("{not json"));
    const error = (await rejection(chat().completions(request))) as DecodeError;
    expect(error).toBeInstanceOf(DecodeError);
    expect(error.text).toBe("{not json");
    expect(error.cause).toBeInstanceOf(SyntaxError);
  });

  it("a mid-stream error frame after a 200 errors the stream with the provider's message", async () => {
    server.handle((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(sse(chunk({ content: "partial" })) + sse({ error: { message: "Model overloaded, try again", type: "server_error" } }));
    });
    const outcome = await readAll(await chat().completions({ ...request, stream: true }));
    expect(outcome.events).toHaveLength(1);
    expect(outcome.error).toBeInstanceOf(StreamError);
    expect((outcome.error as StreamError).message).toBe("Model overloaded, try again");
  });
});

describe("network and timeout errors", () => {
  it("connection refused rejects with NetworkError carrying the cause", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    for (const stream of [false, true]) {
      const error = (await rejection(new Provider({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "k" }).chat.completions({ ...request, stream }))) as NetworkError;
      expect(error).toBeInstanceOf(NetworkError);
      expect(error.url).toBe(`http://127.0.0.1:${port}/v1/chat/completions`);
      expect(error.message).toContain("ECONNREFUSED");
      expect(error.cause).toBeInstanceOf(TypeError);
    }
  });

  it("no response headers within the fetcher's timeout rejects with TimeoutError", async () => {
    // answers long after the timeout, so that a test process stalled on CI still tells the two apart
    server.handle((_req, res) => void sleep(3000).then(() => res.writeHead(200).end("{}")));
    const fetcher = new Fetcher({ baseURL: server.origin, timeout: 100 });
    const started = Date.now();
    const error = (await rejection(new ChatClient({ fetcher }).completions(request))) as TimeoutError;
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error.timeout).toBe(100);
    expect(error.message).toBe(`Request timed out after 100 ms: POST ${server.origin}/chat/completions`);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("a timeout beyond setTimeout's range (or Infinity) is a long deadline, not 1 ms", async () => {
    server.handle((_req, res) => void sleep(50).then(() => res.writeHead(200, { "content-type": "application/json" }).end("{}")));
    for (const timeout of [Infinity, 2 ** 31, 30 * 86_400_000]) {
      const fetcher = new Fetcher({ baseURL: server.origin, timeout });
      expect(await new ChatClient({ fetcher }).completions(request)).toEqual({});
    }
  });

  it("for a JSON result the timeout also covers a body that stalls after the headers", async () => {
    server.handle((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"id":');
      void sleep(1000).then(() => res.end('"x"}'));
    });
    const fetcher = new Fetcher({ baseURL: server.origin, timeout: 100 });
    expect(await rejection(new ChatClient({ fetcher }).completions(request))).toBeInstanceOf(TimeoutError);
  });

  it("a stream does not time out once its headers arrived (the timeout covers the time to the response)", async () => {
    server.handle(async (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(sse(chunk({ content: "a" })));
      await sleep(250);
      res.end(sse(chunk({ content: "b" })) + sse("[DONE]"));
    });
    const fetcher = new Fetcher({ baseURL: server.origin, timeout: 100 });
    const outcome = await readAll(await new ChatClient({ fetcher }).completions({ ...request, stream: true }));
    expect(outcome.error).toBeUndefined();
    expect(outcome.events.map((e) => e.data.choices[0].delta?.content)).toEqual(["a", "b"]);
  });

  it("a connection cut mid-stream errors the stream with NetworkError (unlike a clean end without [DONE])", async () => {
    server.handle(cutAfter(sse(chunk({ content: "a" }))));
    const outcome = await readAll(await chat().completions({ ...request, stream: true }));
    expect(outcome.events).toHaveLength(1);
    expect(outcome.error).toBeInstanceOf(NetworkError);
  });

  // A reason that is a TypeError too: it is the caller's, not a broken connection's, and comes back as it is.
  it.each([
    ["an Error", new Error("user pressed stop")],
    ["a TypeError", new TypeError("stopped by the caller")],
  ])("a caller's AbortSignal (set by a request interceptor) rejects with the caller's own reason (%s), before and during a stream", async (_kind, reason) => {
    server.handle(async (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(sse(chunk({ content: "a" })));
    });
    const controller = new AbortController();
    const fetcher = new Fetcher({ baseURL: server.origin, interceptors: { request: [(exchange) => void (exchange.request.signal = controller.signal)] } });
    const client = new ChatClient({ fetcher });
    const stream = await client.completions({ ...request, stream: true });
    const reader = stream.getReader();
    expect((await reader.read()).value?.data.choices[0].delta?.content).toBe("a");
    controller.abort(reason);
    await expect(reader.read()).rejects.toBe(reason);
    // Already aborted: the request itself rejects with the same reason, not as a NetworkError.
    await expect(client.completions(request)).rejects.toBe(reason);
  });
});

describe("failures that must keep what arrived, or say what the caller got wrong", () => {
  it("a non-2xx whose body is cut or stalls is still HttpStatusError, with its status and request id (the failure is its cause)", async () => {
    server.handle((req, res) => {
      res.writeHead(req.url!.includes("cut") ? 503 : 429, { "content-type": "application/json", "content-length": "200", "x-request-id": "req_42" });
      res.write('{"error":{"message":"over');
      if (req.url!.includes("cut")) void sleep(30).then(() => req.socket.destroy()); // else: the body never completes
    });
    for (const stream of [false, true]) {
      const cut = (await rejection(new Provider({ baseURL: `${server.origin}/cut`, apiKey: "k" }).chat.completions({ ...request, stream }))) as HttpStatusError;
      expect([cut.constructor, cut.status, cut.requestId, cut.body]).toEqual([HttpStatusError, 503, "req_42", ""]);
      expect(cut.cause).toBeInstanceOf(NetworkError);
      const fetcher = new Fetcher({ baseURL: `${server.origin}/stall`, timeout: 150 });
      const stalled = (await rejection(new ChatClient({ fetcher }).completions({ ...request, stream }))) as HttpStatusError;
      expect([stalled.constructor, stalled.status, stalled.requestId]).toEqual([HttpStatusError, 429, "req_42"]);
      expect(stalled.cause).toBeInstanceOf(TimeoutError);
    }
    // the caller's own abort keeps its reason
    const caller = new AbortController();
    const fetcher = new Fetcher({ baseURL: `${server.origin}/stall` });
    fetcher.interceptors.request.push((ex) => void (ex.request.signal = caller.signal));
    const aborted = rejection(new ChatClient({ fetcher }).completions(request));
    await sleep(100);
    caller.abort(new Error("user pressed stop"));
    expect(await aborted).toEqual(new Error("user pressed stop"));
  });

  it("break out of a stream whose connection dropped while the loop was busy ends the loop, throwing nothing", async () => {
    server.handle(cutAfter(sse(chunk({ content: "a" })) + sse(chunk({ content: "b" }))));
    const stream = await chat().completions({ ...request, stream: true });
    let seen = 0;
    for await (const _event of stream) {
      seen++;
      await sleep(200); // the connection drops meanwhile
      break;
    }
    expect(seen).toBe(1);
  });

  it("a header an interceptor sets wins over the client's spelling of the same name in another case", async () => {
    server.handle((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
    const provider = new Provider({ baseURL: server.origin, apiKey: "stale" });
    provider.fetcher.interceptors.request.push((ex) => void (ex.request.headers!["Authorization"] = "Bearer fresh"));
    await new ChatClient({ fetcher: provider.fetcher, headers: { authorization: "Bearer client" } }).completions(request);
    expect(server.requests.at(-1)!.headers.authorization).toBe("Bearer fresh");
  });

  it("what fetch refuses to build is a TypeError, not a NetworkError callers retry; a URL with a password is refused without showing it", async () => {
    const badName = await rejection(new ChatClient({ fetcher: new Fetcher({ baseURL: server.origin, headers: { "X Api Key": "k" } }) }).completions(request));
    expect([badName instanceof NetworkError, badName instanceof TypeError]).toEqual([false, true]);
    const noScheme = await rejection(new ChatClient({ fetcher: new Fetcher({ baseURL: "api.example.com/v1" }) }).completions(request));
    expect([noScheme instanceof NetworkError, noScheme instanceof TypeError]).toEqual([false, true]);
    for (const make of [() => new Provider({ baseURL: "https://user:hunter2@127.0.0.1:1/v1", apiKey: "k" }), () => new Fetcher({ baseURL: "https://user:hunter2@127.0.0.1:1/v1" })]) {
      const refused = (() => {
        try {
          make();
        } catch (error) {
          return error as Error;
        }
        throw new Error("expected the constructor to throw");
      })();
      expect(refused).toBeInstanceOf(TypeError);
      expect(refused.message).toMatch(/^baseURL must not carry credentials \(user:password@127\.0\.0\.1:1\)/);
      expect(refused.message).not.toContain("hunter2");
    }
  });

  it("a timeout of NaN (an unset environment variable) is no deadline, not 1 ms", async () => {
    server.handle((_req, res) => void sleep(30).then(() => res.writeHead(200, { "content-type": "application/json" }).end("{}")));
    expect(await new ChatClient({ fetcher: new Fetcher({ baseURL: server.origin, timeout: Number.NaN }) }).completions(request)).toEqual({});
  });

  it("a NetworkError names the URL also when a response interceptor replaced the response (a new Response has none)", async () => {
    server.handle(cutAfter(sse(chunk({ content: "a" }))));
    const fetcher = new Fetcher({ baseURL: `${server.origin}/v1` });
    fetcher.interceptors.response.push((ex) => void (ex.response = new Response(ex.response!.body, ex.response)));
    const outcome = await readAll(await new ChatClient({ fetcher }).completions({ ...request, stream: true }));
    expect(outcome.error).toBeInstanceOf(NetworkError);
    expect((outcome.error as NetworkError).url).toBe(`${server.origin}/v1/chat/completions`);
  });
});
