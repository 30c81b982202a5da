/** ChatClient metadata (rules 2 and 3), beforeExecute, and Provider's read-only surface. */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  ChatClient,
  Fetcher,
  jsonResultExtractor,
  Provider,
  resolveURL,
  StreamError,
  streamResultExtractor,
  type FetchExchange,
} from "../src/index.js";
import { startLoopbackServer, type LoopbackServer } from "./support/loopback-server.js";

let server: LoopbackServer;
beforeAll(async () => (server = await startLoopbackServer()));
afterAll(() => server.close());
beforeEach(() => {
  server.requests.length = 0;
  server.handle((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"id":"r","object":"chat.completion","created":1,"choices":[]}'));
});

const request = { model: "m", messages: [] };

describe("ChatClient({ fetcher }) reuses an existing fetcher (rule 2)", () => {
  it("keeps that fetcher's base URL, headers and interceptors", async () => {
    const seen: string[] = [];
    const proxy = new Fetcher({
      baseURL: `${server.origin}/proxy/v1`,
      headers: { Authorization: "Bearer proxy-token", "X-Tenant": "acme" },
      interceptors: {
        request: [(exchange) => void (exchange.request.headers["X-Trace"] = "t-1")],
        response: [(exchange) => void seen.push(`${exchange.response?.status}`)],
      },
    });
    const client = new ChatClient({ fetcher: proxy });
    await client.completions(request);
    const [sent] = server.requests;
    expect(sent.url).toBe("/proxy/v1/chat/completions");
    expect(sent.headers).toMatchObject({ authorization: "Bearer proxy-token", "x-tenant": "acme", "x-trace": "t-1" });
    expect(seen).toEqual(["200"]);
  });

  it("a request interceptor sees the unserialised body and may change it", async () => {
    const fetcher = new Fetcher({ baseURL: server.origin });
    fetcher.interceptors.request.push((exchange) => {
      (exchange.request.body as Record<string, unknown>).user = "from-interceptor";
    });
    await new ChatClient({ fetcher }).completions(request);
    expect(JSON.parse(server.requests[0].body)).toEqual({ ...request, user: "from-interceptor" });
  });

  it("a response interceptor may replace the response before the status check", async () => {
    const fetcher = new Fetcher({ baseURL: server.origin });
    fetcher.interceptors.response.push((exchange) => {
      exchange.response = new Response('{"replaced":true}', { status: 200 });
    });
    expect(await new ChatClient({ fetcher }).completions(request)).toEqual({ replaced: true });
  });

  it("apiMetadata headers and timeout apply over the fetcher's; basePath can be overridden", async () => {
    const fetcher = new Fetcher({ baseURL: server.origin, headers: { "X-A": "fetcher", "X-B": "fetcher" } });
    await new ChatClient({ fetcher, headers: { "X-B": "client" }, basePath: "/openai/chat/" }).completions(request);
    expect(server.requests[0].url).toBe("/openai/chat/completions");
    expect(server.requests[0].headers).toMatchObject({ "x-a": "fetcher", "x-b": "client" });
  });

  it("header names are compared without case: the client's (or an interceptor's) replaces the fetcher's, never both sent", async () => {
    const fetcher = new Fetcher({ baseURL: server.origin, headers: { Authorization: "Bearer provider-key", "X-Tenant": "a" } });
    fetcher.interceptors.request.push((exchange) => void (exchange.request.headers["x-tenant"] = "b"));
    await new ChatClient({ fetcher, headers: { authorization: "Bearer override" } }).completions(request);
    expect(server.requests[0].headers).toMatchObject({ authorization: "Bearer override", "x-tenant": "b" });
  });

  it("a request built by a class is sent as JSON, as a plain object is", async () => {
    class Req {
      model = "m";
      messages = [{ role: "user", content: "hi" }];
    }
    await new ChatClient({ fetcher: new Fetcher({ baseURL: server.origin }) }).completions(new Req());
    expect(server.requests[0].headers["content-type"]).toBe("application/json");
    expect(JSON.parse(server.requests[0].body)).toEqual({ model: "m", messages: [{ role: "user", content: "hi" }] });
  });

  it("a 200 whose body is an error (no choices) rejects with StreamError, as the same payload does in a stream", async () => {
    server.handle((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"error":{"message":"model overloaded","type":"server_error"}}'));
    const err = await new ChatClient({ fetcher: new Fetcher({ baseURL: server.origin }) }).completions(request).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StreamError);
    expect([(err as StreamError).message, (err as StreamError).error]).toEqual(["model overloaded", { message: "model overloaded", type: "server_error" }]);
  });

  it("without a fetcher, completions() rejects with a message that says what to pass", async () => {
    await expect(new ChatClient().completions(request)).rejects.toThrow(/new ChatClient\(\{ fetcher \}\)/);
  });
});

describe("metadata is merged and cached on the first call (rule 3)", () => {
  it("changing apiMetadata after the first call has no effect", async () => {
    const first = new Fetcher({ baseURL: `${server.origin}/first` });
    const second = new Fetcher({ baseURL: `${server.origin}/second` });
    const metadata = { fetcher: first, headers: { "X-Version": "1" } };
    const client = new ChatClient(metadata);
    await client.completions(request);
    metadata.fetcher = second;
    metadata.headers["X-Version"] = "2";
    await client.completions(request);
    expect(server.requests.map((r) => [r.url, r.headers["x-version"]])).toEqual([
      ["/first/chat/completions", "1"],
      ["/first/chat/completions", "1"],
    ]);
  });

  it("changes made before the first call are used", async () => {
    const metadata = { fetcher: new Fetcher({ baseURL: `${server.origin}/a` }) };
    const client = new ChatClient(metadata);
    metadata.fetcher = new Fetcher({ baseURL: `${server.origin}/b` });
    await client.completions(request);
    expect(server.requests[0].url).toBe("/b/chat/completions");
  });
});

describe("beforeExecute(exchange)", () => {
  const exchangeFor = (body: unknown): FetchExchange =>
    new Fetcher({ baseURL: "http://unused" }).createExchange({ url: "chat/completions", method: "POST", headers: {}, body }, jsonResultExtractor);

  it("selects the event-stream extractor when request.body.stream is truthy", () => {
    for (const stream of [true, 1, "yes"]) {
      const exchange = exchangeFor({ ...request, stream });
      new ChatClient().beforeExecute(exchange);
      expect(exchange.resultExtractor).toBe(streamResultExtractor);
    }
  });

  it("leaves the JSON extractor when stream is false, absent or the body is missing", () => {
    for (const body of [{ ...request, stream: false }, request, undefined]) {
      const exchange = exchangeFor(body);
      new ChatClient().beforeExecute(exchange);
      expect(exchange.resultExtractor).toBe(jsonResultExtractor);
    }
  });
});

describe("Provider", () => {
  it("exposes read-only fetcher and chat; chat uses the provider's fetcher", async () => {
    const provider = new Provider({ baseURL: server.origin, apiKey: "sk-1" });
    expect(provider.fetcher.headers).toEqual({ Authorization: "Bearer sk-1" });
    expect(provider.chat.apiMetadata?.fetcher).toBe(provider.fetcher);
    expect(() => {
      // @ts-expect-error fetcher is read-only
      provider.fetcher = new Fetcher({ baseURL: "http://elsewhere" });
    }).toThrow(TypeError);
    expect(() => {
      // @ts-expect-error chat is read-only
      provider.chat = new ChatClient();
    }).toThrow(TypeError);
  });

  it("requires a baseURL: there is no default endpoint", () => {
    // @ts-expect-error baseURL is required
    expect(() => new Provider({ apiKey: "k" })).toThrow(/baseURL/);
    expect(() => new Provider({ baseURL: "", apiKey: "k" })).toThrow(/baseURL/);
    // a mistake in it is said at once, not reported by every call as a NetworkError (which callers retry)
    for (const baseURL of ["api.example.com/v1", "htps://api.example.com/v1", "http://"]) {
      expect(() => new Provider({ baseURL, apiKey: "k" }), baseURL).toThrow(/must be an http:\/\/ or https:\/\/ URL/);
    }
  });

  it("does not validate the API key", async () => {
    // An empty key is sent as is (HTTP trims the trailing space); the server, not the library, decides.
    await new Provider({ baseURL: server.origin, apiKey: "" }).chat.completions(request);
    expect(server.requests[0].headers.authorization).toBe("Bearer");
  });
});

describe("resolveURL", () => {
  it("joins with exactly one slash and leaves absolute URLs alone", () => {
    expect(resolveURL("http://h/v1", "chat/completions")).toBe("http://h/v1/chat/completions");
    expect(resolveURL("http://h/v1//", "/chat/completions")).toBe("http://h/v1/chat/completions");
    expect(resolveURL("http://h/v1", "https://other/x")).toBe("https://other/x");
  });
  it("puts the path before a query of baseURL, and joins a query of the path's own to it", () => {
    expect(resolveURL("http://h/d/?api-version=1", "/chat/completions")).toBe("http://h/d/chat/completions?api-version=1");
    expect(resolveURL("http://h/d?api-version=1", "models?limit=2")).toBe("http://h/d/models?limit=2&api-version=1");
    expect(resolveURL("http://h/d#frag", "chat/completions")).toBe("http://h/d/chat/completions");
  });
});
