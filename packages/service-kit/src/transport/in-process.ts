import { create, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextKey,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type ServiceImpl,
  type StreamRequest,
  type StreamResponse,
  type Transport,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { createDeadlineSignal, createLinkedAbortController, getAbortSignalReason, untilFirst } from "@connectrpc/connect/protocol";
import { isReadOnly, outcomeUnknown } from "./call-outcome.js";
import { CallerHeaders, isEmptyHeadersInit } from "./caller-headers.js";
import { LONGEST_TIMER_MS } from "../longest-timer.js";

export interface LocalService {
  service: DescService;
  impl: ServiceImpl<DescService>;
}

type Handler = (req: unknown, ctx: HandlerContext) => unknown;

interface Served {
  handler: Handler;
  /** Built once per method, not per call. */
  url: string;
}

// Calls without a signal of their own share one that never aborts, instead of allocating one per call.
const NEVER = new AbortController().signal;

// Classes, not object literals with closures: this runs on every call, and per-call closures showed up as GC time.
// Every field an interceptor may read is an own data property, so the standard `next({ ...req })` and
// `{ ...res, message }` keep them (a prototype getter would be dropped by the spread).

/**
 * A fresh, empty ContextValues per call, as a network server gives: nothing the caller put in its call's
 * contextValues reaches the service side (it could not over the wire either). Prototype methods, so one allocation.
 */
class CallValues implements ContextValues {
  get<T>(key: ContextKey<T>): T {
    const self = this as unknown as Record<symbol, T>;
    return key.id in self ? self[key.id] : key.defaultValue;
  }
  set<T>(key: ContextKey<T>, value: T): this {
    (this as unknown as Record<symbol, T>)[key.id] = value;
    return this;
  }
  delete(key: ContextKey<unknown>): this {
    delete (this as unknown as Record<symbol, unknown>)[key.id];
    return this;
  }
}

/** What interceptors see of an in-process call: the same fields, as own properties, as a network request. */
class InProcessRequest {
  readonly requestMethod = "POST";
  readonly service: DescService;
  readonly header: Headers;
  readonly contextValues: ContextValues = new CallValues();
  constructor(
    readonly method: DescMethod,
    readonly stream: boolean,
    readonly message: unknown,
    readonly url: string,
    readonly signal: AbortSignal,
    header: HeadersInit | undefined,
    /** Not part of Connect's request type: how the handler's `timeoutMs()` learns the deadline. */
    readonly deadline: number | undefined,
  ) {
    this.service = method.parent;
    this.header = isEmptyHeadersInit(header) ? new Headers() : new CallerHeaders(header);
  }
}

/**
 * The handler's context, built from the request the innermost interceptor passed on (as Connect's server does): an
 * interceptor that replaces `header`, `signal` or `contextValues` changes what the handler sees. No AbortController
 * links or timers unless the call has a deadline.
 */
class InProcessContext implements HandlerContext {
  readonly protocolName = "in-process";
  readonly requestMethod = "POST";
  readonly method: DescMethod;
  readonly service: DescService;
  readonly url: string;
  readonly signal: AbortSignal;
  readonly values: ContextValues;
  readonly requestHeader: Headers;
  readonly responseHeader = new Headers();
  readonly responseTrailer = new Headers();
  private readonly deadline: number | undefined;
  constructor(req: InProcessRequest) {
    this.method = req.method;
    this.service = req.service;
    this.url = req.url;
    this.signal = req.signal;
    this.values = req.contextValues;
    this.requestHeader = req.header;
    this.deadline = req.deadline;
  }
  timeoutMs(): number | undefined {
    return this.deadline === undefined ? undefined : this.deadline - Date.now();
  }
}

/** The response interceptors see; `header` and `trailer` are the handler context's, as on a network server. */
class InProcessResponse {
  readonly service: DescService;
  readonly header: Headers;
  readonly trailer: Headers;
  constructor(
    readonly method: DescMethod,
    readonly stream: boolean,
    readonly message: unknown,
    ctx: InProcessContext,
  ) {
    this.service = method.parent;
    this.header = ctx.responseHeader;
    this.trailer = ctx.responseTrailer;
  }
}

/** Connect's rule for methods that take one request message: exactly one, or the call is refused. */
async function single(input: AsyncIterable<unknown>, method: DescMethod): Promise<unknown> {
  const it = input[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done === true) throw new ConnectError(`protocol error: missing input message for ${method.methodKind} method`, Code.Unimplemented);
  const second = await it.next();
  if (second.done !== true) {
    await it.return?.();
    throw new ConnectError(`protocol error: received extra input message for ${method.methodKind} method`, Code.Unimplemented);
  }
  return first.value;
}

async function* normalized(schema: DescMessage, messages: AsyncIterable<unknown>, ctx?: InProcessContext): AsyncIterable<unknown> {
  try {
    for await (const m of messages) yield create(schema, m as never);
  } catch (err) {
    throw ctx ? withResponseMetadata(err, ctx) : err;
  }
}

/**
 * What a failed handler had set apart, for a server that answers the error itself (connect-unary.ts): its response
 * headers and trailers, and the error's own metadata before they were folded into it.
 */
export const responsesOfErrors = new WeakMap<ConnectError, { header: Headers; trailer: Headers; metadata: Headers }>();

/**
 * Over the wire, the response headers and trailers a handler set before failing arrive in the error's metadata
 * (e.g. a `www-authenticate` next to `unauthenticated`); the same here. Other errors pass untouched, for the error
 * interceptor to map (converting them here would turn a hidden `internal` into a leaked `unknown`).
 */
function withResponseMetadata(err: unknown, ctx: InProcessContext): unknown {
  if (!(err instanceof ConnectError)) return err;
  responsesOfErrors.set(err, { header: ctx.responseHeader, trailer: ctx.responseTrailer, metadata: new Headers(err.metadata) });
  ctx.responseHeader.forEach((value, name) => err.metadata.append(name, value));
  ctx.responseTrailer.forEach((value, name) => err.metadata.append(name, value));
  return err;
}

async function* oneMessage(message: Promise<unknown>): AsyncIterable<unknown> {
  yield await message;
}

/** The error of a call whose signal aborted: its reason, and for a write cut by its deadline, that it may have been applied. */
function abortError(signal: AbortSignal, method: DescMethod): ConnectError {
  const err = ConnectError.from(getAbortSignalReason(signal), Code.Canceled);
  if (err.code !== Code.DeadlineExceeded || isReadOnly(method)) return err;
  return new ConnectError(`the deadline passed before the answer (${err.rawMessage}): ${outcomeUnknown()}`, Code.DeadlineExceeded);
}

/**
 * Rejects with the signal's reason (cancelled, or deadline exceeded) once it aborts, as a network client would. The
 * call has started (it is a promise): its own outcome is then left to run out, observed so that a failure of it is
 * not an unhandled rejection.
 */
function raceAbort<T>(call: Promise<T>, signal: AbortSignal, method: DescMethod): Promise<T> {
  if (signal.aborted) {
    call.catch(() => undefined);
    return Promise.reject(abortError(signal, method));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal, method));
    signal.addEventListener("abort", onAbort, { once: true });
    call.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(ConnectError.from(err));
      },
    );
  });
}

/** The call's signal: the caller's, or, with a deadline, one that also aborts with `deadline_exceeded` in time. */
function callSignal(signal: AbortSignal | undefined, timeoutMs: number | undefined): { signal: AbortSignal; cleanup?: () => void } {
  if (timeoutMs === undefined) return { signal: signal ?? NEVER };
  const deadline = createDeadlineSignal(Math.min(timeoutMs, LONGEST_TIMER_MS)); // a longer one would fire at once
  const linked = createLinkedAbortController(signal, deadline.signal);
  return { signal: linked.signal, cleanup: deadline.cleanup };
}

const deadlineOf = (timeoutMs: number | undefined): number | undefined => (timeoutMs === undefined ? undefined : Date.now() + timeoutMs);

/**
 * The all-in-one process's transport: Connect clients call the service implementations directly, through the same
 * server interceptors a network call gets, without encoding messages to bytes and back. Connect's own
 * createRouterTransport does that round trip and cost ~185 µs per call here, more than a whole bare Fastify request.
 *
 * Parity with the network (see the package README, "Transports"): interceptors see the same request and response
 * shapes; the handler sees the request as the innermost interceptor passed it on; unary and server-streaming methods
 * take exactly one request message; client and bidi streams work; the call's contextValues do not cross; errors
 * arrive as ConnectError with the handler's code and message.
 */
export function inProcessTransport(
  services: LocalService[],
  interceptors: Interceptor[],
  /** `urlBase`: what interceptors see of the call's URL before `/pkg.Service/Method` (default `in-process://`). */
  options: { urlBase?: string } = {},
): Transport {
  const urlBase = options.urlBase ?? "in-process://";
  const served = new Map<DescMethod, Served>();
  for (const { service, impl } of services) {
    for (const method of service.methods) {
      const fn = (impl as Record<string, Handler | undefined>)[method.localName];
      if (fn) served.set(method, { handler: fn.bind(impl), url: `${urlBase}/${service.typeName}/${method.name}` });
    }
  }
  const handlerOf = (method: DescMethod): Handler => {
    const s = served.get(method);
    if (!s) throw new ConnectError(`${method.parent.typeName}/${method.name} is not served in this process`, Code.Unimplemented);
    return s.handler;
  };
  const urlOf = (method: DescMethod): string => served.get(method)?.url ?? `${urlBase}/${method.parent.typeName}/${method.name}`;

  // Interceptor chains are built once; the first interceptor is the outermost, as in Connect.
  const chain = <T>(next: T): T => interceptors.reduceRight((n, i) => i(n as never) as T, next);
  const callUnary = chain(async (req: UnaryRequest): Promise<UnaryResponse> => {
    const ctx = new InProcessContext(req as unknown as InProcessRequest);
    let out: unknown;
    try {
      out = await handlerOf(req.method)(req.message, ctx);
    } catch (err) {
      throw withResponseMetadata(err, ctx);
    }
    return new InProcessResponse(req.method, false, create(req.method.output, out as never), ctx) as unknown as UnaryResponse;
  });
  const callStream = chain(async (req: StreamRequest): Promise<StreamResponse> => {
    const ctx = new InProcessContext(req as unknown as InProcessRequest);
    const method = req.method;
    const handler = handlerOf(method);
    let out: AsyncIterable<unknown>;
    switch (method.methodKind) {
      case "server_streaming":
        out = handler(await single(req.message, method), ctx) as AsyncIterable<unknown>;
        break;
      case "client_streaming":
        out = oneMessage(handler(req.message, ctx) as Promise<unknown>);
        break;
      default:
        out = handler(req.message, ctx) as AsyncIterable<unknown>;
    }
    // Handler errors surface while the messages are read: `normalized` adds the response metadata to them.
    return new InProcessResponse(method, true, normalized(method.output, out, ctx), ctx) as unknown as StreamResponse;
  });

  return {
    async unary(method, signal, timeoutMs, header, input) {
      const message = create(method.input, input);
      try {
        // The common case (the REST gateway's): no signal, no deadline, so no abort listeners, links or timers.
        if (signal === undefined && timeoutMs === undefined) {
          return (await callUnary(new InProcessRequest(method, false, message, urlOf(method), NEVER, header, undefined) as never)) as never;
        }
        const call = callSignal(signal, timeoutMs);
        try {
          // Already over (a deadline of 0, a cancelled caller): the call is not started, so nothing was applied.
          if (call.signal.aborted) throw ConnectError.from(getAbortSignalReason(call.signal), Code.Canceled);
          const req = new InProcessRequest(method, false, message, urlOf(method), call.signal, header, deadlineOf(timeoutMs));
          return (await raceAbort(callUnary(req as unknown as UnaryRequest), call.signal, method)) as never;
        } finally {
          call.cleanup?.();
        }
      } catch (err) {
        throw ConnectError.from(err);
      }
    },

    async stream(method, signal, timeoutMs, header, input) {
      const call = callSignal(signal, timeoutMs);
      const req = new InProcessRequest(method, true, normalized(method.input, input), urlOf(method), call.signal, header, deadlineOf(timeoutMs));
      let res: StreamResponse;
      try {
        if (call.signal.aborted) throw ConnectError.from(getAbortSignalReason(call.signal), Code.Canceled); // not started
        const started = callStream(req as unknown as StreamRequest);
        res = await (call.signal === NEVER ? started : raceAbort(started, call.signal, method));
      } catch (err) {
        call.cleanup?.();
        throw ConnectError.from(err);
      }
      const callerSignal = call.signal;
      async function* received() {
        try {
          for await (const m of res.message) {
            if (callerSignal.aborted) break;
            yield m;
          }
        } catch (err) {
          throw ConnectError.from(callerSignal.aborted ? getAbortSignalReason(callerSignal) : err, callerSignal.aborted ? Code.Canceled : undefined);
        } finally {
          call.cleanup?.();
        }
        // A network client sees a cancelled or timed-out stream fail, not end cleanly.
        if (callerSignal.aborted) throw ConnectError.from(getAbortSignalReason(callerSignal), Code.Canceled);
      }
      // A network server sends the response headers with the first message (or the end): wait for it too, so the
      // caller sees the headers a handler sets before its first yield.
      try {
        const first = untilFirst(received());
        return { ...res, message: await (callerSignal === NEVER ? first : raceAbort(first, callerSignal, method)) } as never;
      } catch (err) {
        call.cleanup?.();
        throw err;
      }
    },
  };
}
