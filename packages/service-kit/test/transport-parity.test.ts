import { create } from "@bufbuild/protobuf";
import { StringValueSchema, type StringValue } from "@bufbuild/protobuf/wkt";
import {
  Code,
  ConnectError,
  createClient,
  createContextKey,
  createContextValues,
  type HandlerContext,
  type Interceptor,
  type StreamRequest,
  type StreamResponse,
  type Transport,
} from "@connectrpc/connect";
import { createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, errorInterceptor, inProcessTransport, remoteTransport, serveConnect, type ConnectServer } from "../src/index.js";
import { EchoService } from "./support/echo-service.js";

// One suite, every transport: what an interceptor written the standard Connect way sees and does must not depend on
// whether the service runs in this process or behind a listener.

const logger = createLogger("parity", "silent");
const callerKey = createContextKey<string>("none", { description: "who the interceptor says is calling" });

/** Only the headers this suite sets (a network request also carries protocol headers such as content-type). */
const ours = (h: Headers): Record<string, string> => Object.fromEntries([...h].filter(([k]) => k.startsWith("x-t-")));

type Seen = { requestHeaders: Record<string, string>; responseHeader?: string | null; responseTrailer?: string | null };
let seenByInterceptor: Seen[] = [];
let waiting = 0;

const text = (value: string): StringValue => create(StringValueSchema, { value });

async function* suffixed<T extends { value: string }>(messages: AsyncIterable<T>, suffix: string): AsyncIterable<T> {
  for await (const m of messages) yield { ...m, value: m.value + suffix };
}

/**
 * Reads and adds request headers, spreads the request, reads and adds response headers (and, on a unary call, whose
 * trailers are there once it answered, response trailers), spreads the response.
 */
const headerInterceptor: Interceptor = (next) => async (req) => {
  const requestHeaders = ours(req.header);
  req.header.set("x-t-added-by-interceptor", "yes");
  const res = await next({ ...req });
  seenByInterceptor.push({ requestHeaders, responseHeader: res.header.get("x-t-from-handler"), ...(res.stream ? {} : { responseTrailer: res.trailer.get("x-t-trailer-from-handler") }) });
  res.header.set("x-t-interceptor-response", "yes");
  if (!res.stream) res.trailer.set("x-t-interceptor-trailer", "yes");
  return { ...res };
};

/** An auth-like interceptor: derives the caller from a header and hands it to the handler in contextValues. */
const identityInterceptor: Interceptor = (next) => async (req) => {
  const auth = req.header.get("authorization");
  if (auth === "Bearer refused") throw new ConnectError("the token is not valid: log in again", Code.Unauthenticated);
  if (auth) req.contextValues.set(callerKey, auth.replace(/^Bearer /, ""));
  return next({ ...req });
};

/** Wraps the messages of a stream both ways, as a logging or validation interceptor would. */
const streamInterceptor: Interceptor = (next) => async (req) => {
  if (!req.stream) return next(req);
  const res = await next({ ...req, message: suffixed(req.message as AsyncIterable<StringValue>, "+in") } as StreamRequest);
  return { ...res, message: suffixed((res as StreamResponse).message as AsyncIterable<StringValue>, "+out") } as StreamResponse;
};

const interceptors = [errorInterceptor(logger), headerInterceptor, identityInterceptor, streamInterceptor];

function describeContext(ctx: HandlerContext): string {
  return JSON.stringify({ headers: ours(ctx.requestHeader), caller: ctx.values.get(callerKey), timeout: ctx.timeoutMs() !== undefined });
}

function answer(value: string, ctx: HandlerContext): StringValue {
  ctx.responseHeader.set("x-t-from-handler", "header");
  ctx.responseTrailer.set("x-t-trailer-from-handler", "trailer");
  if (value === "fail") throw new ConnectError("the value is wrong: send another one", Code.InvalidArgument);
  if (value === "crash") throw new Error("a bug with a secret in its message");
  return text(value === "context" ? describeContext(ctx) : value);
}

const impl = {
  say: async (req: StringValue, ctx: HandlerContext) => {
    if (req.value === "wait-for-deadline") {
      // Waits for the call's deadline (or the caller) to abort it; the client must still see the right code.
      waiting++;
      await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
    }
    if (req.value === "ignore-deadline") await new Promise((resolve) => setTimeout(resolve, 500)); // a service that is stuck
    return answer(req.value, ctx);
  },
  async *count(req: StringValue, ctx: HandlerContext) {
    if (req.value.startsWith("context")) {
      yield text(describeContext(ctx));
      return;
    }
    const n = parseInt(req.value, 10); // "3+in": the stream interceptor marks request messages too
    ctx.responseHeader.set("x-t-from-handler", "header");
    for (let i = 1; i <= n; i++) yield text(String(i));
    ctx.responseTrailer.set("x-t-trailer-from-handler", "trailer");
    if (n === 0) throw new ConnectError("nothing to count: send a positive number", Code.InvalidArgument);
  },
  collect: async (reqs: AsyncIterable<StringValue>, ctx: HandlerContext) => {
    const parts: string[] = [];
    for await (const r of reqs) parts.push(r.value);
    return answer(parts.join(","), ctx);
  },
  async *chat(reqs: AsyncIterable<StringValue>) {
    for await (const r of reqs) yield text(r.value.toUpperCase());
  },
};

interface Target {
  name: string;
  transport: Transport;
  /** Requests and responses can interleave (HTTP/2 or in-process); HTTP/1.1 cannot do an interactive bidi call. */
  fullDuplex: boolean;
}

let server: ConnectServer;
const targets: Target[] = [];

beforeAll(async () => {
  server = await serveConnect({ routes: (r) => r.service(EchoService, impl), interceptors, logger, port: 0, grpcPort: 0 });
  targets.push(
    { name: "in-process", transport: inProcessTransport([{ service: EchoService, impl: impl as never }], interceptors), fullDuplex: true },
    // remoteTransport: unary and server streams over HTTP/1.1, client and bidi streams over h2c.
    { name: "connect", transport: remoteTransport(server.url, { http2BaseUrl: server.grpcUrl }), fullDuplex: true },
    { name: "grpc-web (HTTP/1.1)", transport: createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" }), fullDuplex: false },
    { name: "grpc (h2c)", transport: createGrpcTransport({ baseUrl: server.grpcUrl }), fullDuplex: true },
  );
});
afterAll(async () => server?.close());

/** Runs `fn` on every transport and returns the results by transport name, so one toEqual compares them all. */
async function onEach<T>(fn: (t: Target) => Promise<T>, only = (_: Target) => true): Promise<Record<string, T>> {
  const out: Record<string, T> = {};
  for (const t of targets.filter(only)) out[t.name] = await fn(t);
  return out;
}

const same = <T>(value: T, only = (_: Target) => true): Record<string, T> =>
  Object.fromEntries(targets.filter(only).map((t) => [t.name, value]));

async function failure(call: Promise<unknown>): Promise<{ code: string; message: string }> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof ConnectError)) throw new Error(`expected a ConnectError, got ${String(err)}`);
  return { code: Code[err.code], message: err.rawMessage };
}

describe("interceptors see the same call on every transport", () => {
  it("request headers reach interceptors and handler; headers added by an interceptor and spread requests keep them", async () => {
    const results = await onEach(async ({ transport }) => {
      seenByInterceptor = [];
      const res = await createClient(EchoService, transport).say(text("context"), { headers: { "x-t-caller": "c1", "x-t-multi": "a" } });
      return { handler: JSON.parse(res.value), interceptor: seenByInterceptor };
    });
    expect(results).toEqual(
      same({
        handler: { headers: { "x-t-caller": "c1", "x-t-multi": "a", "x-t-added-by-interceptor": "yes" }, caller: "none", timeout: expect.any(Boolean) },
        interceptor: [{ requestHeaders: { "x-t-caller": "c1", "x-t-multi": "a" }, responseHeader: "header", responseTrailer: "trailer" }],
      }),
    );
  });

  it("response headers and trailers set by the handler and by interceptors reach the caller", async () => {
    const results = await onEach(async ({ transport }) => {
      const got: { header?: Record<string, string>; trailer?: Record<string, string> } = {};
      await createClient(EchoService, transport).say(text("hi"), {
        onHeader: (h) => (got.header = ours(h)),
        onTrailer: (t) => (got.trailer = ours(t)),
      });
      return got;
    });
    expect(results).toEqual(
      same({ header: { "x-t-from-handler": "header", "x-t-interceptor-response": "yes" }, trailer: { "x-t-trailer-from-handler": "trailer", "x-t-interceptor-trailer": "yes" } }),
    );
  });

  it("an identity derived from a header crosses to the handler in contextValues; the caller's own contextValues never do", async () => {
    const results = await onEach(async ({ transport }) => {
      const client = createClient(EchoService, transport);
      const forged = createContextValues().set(callerKey, "forged");
      const withToken = await client.say(text("context"), { headers: { authorization: "Bearer alice" } });
      const withForgedValue = await client.say(text("context"), { contextValues: forged });
      return [JSON.parse(withToken.value).caller, JSON.parse(withForgedValue.value).caller];
    });
    expect(results).toEqual(same(["alice", "none"]));
  });

  it("errors from handlers and interceptors arrive with the same code and message", async () => {
    const results = await onEach(async ({ transport }) => {
      const client = createClient(EchoService, transport);
      return [
        await failure(client.say(text("fail"))),
        await failure(client.say(text("crash"))),
        await failure(client.say(text("hi"), { headers: { authorization: "Bearer refused" } })),
        await failure(collectAll(client.count(text("0")))),
      ];
    });
    expect(results).toEqual(
      same([
        { code: "InvalidArgument", message: "the value is wrong: send another one" },
        { code: "Internal", message: "internal error: the server logged the details" },
        { code: "Unauthenticated", message: "the token is not valid: log in again" },
        { code: "InvalidArgument", message: "nothing to count: send a positive number" },
      ]),
    );
  });

  it("a handler's response headers travel with its error", async () => {
    const results = await onEach(async ({ transport }) => {
      const err = await createClient(EchoService, transport)
        .say(text("fail"))
        .then(() => expect.unreachable(), (e: unknown) => ConnectError.from(e));
      return { fromHandler: err.metadata.get("x-t-from-handler"), trailer: err.metadata.get("x-t-trailer-from-handler") };
    });
    expect(results).toEqual(same({ fromHandler: "header", trailer: "trailer" }));
  });

  it("a deadline ends the call with deadline_exceeded, and the handler is told it has one", async () => {
    const results = await onEach(async ({ transport }) => {
      const client = createClient(EchoService, transport);
      const ctx = JSON.parse((await client.say(text("context"), { timeoutMs: 5_000 })).value);
      const err = await failure(client.say(text("wait-for-deadline"), { timeoutMs: 50 }));
      return { told: ctx.timeout, code: err.code };
    });
    expect(results).toEqual(same({ told: true, code: "DeadlineExceeded" }));
  });

  it("a caller that aborts ends the call with canceled", async () => {
    const results = await onEach(async ({ transport }) => {
      const abort = new AbortController();
      const before = waiting;
      const call = failure(createClient(EchoService, transport).say(text("wait-for-deadline"), { signal: abort.signal }));
      await expect.poll(() => waiting).toBe(before + 1); // the handler is running
      abort.abort();
      return (await call).code;
    });
    expect(results).toEqual(same("Canceled"));
  });
});

async function collectAll<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const m of stream) out.push(m);
  return out;
}

const values = (ms: StringValue[]) => ms.map((m) => m.value);

describe("streams behave as Connect's on every transport", () => {
  it("server stream: messages pass the interceptor's wrapper; headers and trailers arrive", async () => {
    const results = await onEach(async ({ transport }) => {
      const got: { header?: Record<string, string>; trailer?: Record<string, string> } = {};
      const messages = await collectAll(
        createClient(EchoService, transport).count(text("3"), { onHeader: (h) => (got.header = ours(h)), onTrailer: (t) => (got.trailer = ours(t)) }),
      );
      return { messages: values(messages), ...got };
    });
    expect(results).toEqual(
      same({
        messages: ["1+out", "2+out", "3+out"],
        header: { "x-t-from-handler": "header", "x-t-interceptor-response": "yes" },
        trailer: { "x-t-trailer-from-handler": "trailer" },
      }),
    );
  });

  it("a server stream given two request messages is refused", async () => {
    async function* two() {
      yield text("1");
      yield text("2");
    }
    const results = await onEach(async ({ transport }) => {
      const res = transport.stream(EchoService.method.count, undefined, undefined, undefined, two(), undefined);
      return (await failure(res.then((r) => collectAll(r.message)))).code;
    });
    expect(results).toEqual(same("Unimplemented"));
  });

  it("client stream: every message reaches the handler through the interceptor's wrapper", async () => {
    async function* parts() {
      yield text("a");
      yield text("b");
    }
    const results = await onEach(async ({ transport }) => (await createClient(EchoService, transport).collect(parts())).value);
    expect(results).toEqual(same("a+in,b+in+out"));
  });

  it("bidi stream: each answer arrives before the next request is sent", async () => {
    const duplex = (t: Target) => t.fullDuplex;
    const results = await onEach(async ({ transport }) => {
      const outbox = new Outbox<StringValue>();
      const answers = createClient(EchoService, transport).chat(outbox)[Symbol.asyncIterator]();
      const got: string[] = [];
      for (const word of ["ping", "pong"]) {
        outbox.push(text(word));
        got.push((await answers.next()).value.value); // would hang on a half-duplex transport
      }
      outbox.end();
      expect((await answers.next()).done).toBe(true);
      return got;
    }, duplex);
    expect(results).toEqual(same(["PING+IN+out", "PONG+IN+out"], duplex));
  });
});

describe("remoteTransport", () => {
  it("gives unary calls a default deadline", async () => {
    const client = createClient(EchoService, remoteTransport(server.url, { defaultTimeoutMs: 50 }));
    expect(await failure(client.say(text("wait-for-deadline")))).toEqual({ code: "DeadlineExceeded", message: expect.any(String) });
    expect(JSON.parse((await client.say(text("context"), { timeoutMs: 60_000 })).value).timeout).toBe(true);
  });

  it("a write the service does not answer in time says it may or may not have been applied", async () => {
    const client = createClient(EchoService, remoteTransport(server.url, { defaultTimeoutMs: 50 }));
    expect(await failure(client.say(text("ignore-deadline")))).toEqual({ code: "DeadlineExceeded", message: expect.stringContaining("did not answer within 50 ms: the write may or may not have been applied") });
  });

  it("gives streams none (a watch stays open until the caller leaves), unless the call sets one", async () => {
    const client = createClient(EchoService, remoteTransport(server.url, { defaultTimeoutMs: 50 }));
    const [untimed] = await collectAll(client.count(text("context")));
    const [timed] = await collectAll(client.count(text("context"), { timeoutMs: 60_000 }));
    const told = (m: StringValue) => JSON.parse(m.value.replace(/\+out$/, "")).timeout; // the stream interceptor's mark
    expect([told(untimed), told(timed)]).toEqual([false, true]);
  });
});

/** An async iterable the test feeds one message at a time. */
class Outbox<T> implements AsyncIterable<T> {
  private queue: T[] = [];
  private ended = false;
  private wake: (() => void) | undefined;
  push(m: T): void {
    this.queue.push(m);
    this.wake?.();
  }
  end(): void {
    this.ended = true;
    this.wake?.();
  }
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.queue.length > 0) yield this.queue.shift()!;
      else if (this.ended) return;
      else await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}
