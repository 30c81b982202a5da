/**
 * A small HTTP fetcher on the platform `fetch`: a base URL, default headers, an optional timeout, request and
 * response interceptors, and typed errors. It knows nothing about chat; `ChatClient` drives it with an exchange.
 */
import { HttpStatusError, TimeoutError } from "./errors.js";
import { readBody, toNetworkError } from "./response-body.js";

/** One request as interceptors see it. `url` is relative to the fetcher's `baseURL` unless it is absolute. */
export interface FetchRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  /** A plain object or array is sent as JSON (after the request interceptors); other bodies are sent as they are. */
  body?: unknown;
  /** Overrides the fetcher's `timeout` for this request (milliseconds). */
  timeout?: number;
  /** Aborts the request; the abort reason is what the caller sees. */
  signal?: AbortSignal;
}

/** Turns a validated response into the call's result. It may return a promise. */
export type ResultExtractor = (exchange: FetchExchange) => unknown;

/** The state of one call, shared by the hooks, interceptors and the result extractor. */
export interface FetchExchange {
  readonly fetcher: Fetcher;
  request: FetchRequest;
  /** Chosen before the call runs (e.g. by `ChatClient.beforeExecute`); called once the status was validated. */
  resultExtractor: ResultExtractor;
  /** Set once the response headers arrived; a response interceptor may replace it. */
  response?: Response;
  /** The URL the request was sent to, set as it is sent (`baseURL` joined with the request's `url`). */
  url?: string;
  /** Free-form values that hooks and interceptors pass to each other. */
  readonly attributes: Map<string, unknown>;
}

/** Runs before the request is sent (may edit `exchange.request`) or after the response arrived (may replace `exchange.response`). */
export type Interceptor = (exchange: FetchExchange) => void | Promise<void>;

export interface FetcherInterceptors {
  /** Run in order before the request is sent. */
  request: Interceptor[];
  /** Run in order after the headers arrived, before the status check. */
  response: Interceptor[];
}

export interface FetcherOptions {
  /** Prefix of every relative request URL. */
  baseURL: string;
  /** Sent with every request; a request's own headers win. */
  headers?: Record<string, string>;
  /** Milliseconds until the response must have arrived (headers; for JSON results also the body). No timeout by default. */
  timeout?: number;
  interceptors?: Partial<FetcherInterceptors>;
  /** The `fetch` to call; defaults to the global one. */
  fetch?: typeof globalThis.fetch;
}

/** The longest delay `setTimeout` honours (about 24.8 days); a longer one would fire after 1 ms. */
const MAX_TIMER_DELAY = 2 ** 31 - 1;

export class Fetcher {
  readonly baseURL: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly timeout: number | undefined;
  readonly interceptors: FetcherInterceptors;
  readonly #fetch: typeof globalThis.fetch;

  constructor(options: FetcherOptions) {
    refuseCredentials(options.baseURL);
    this.baseURL = options.baseURL;
    this.headers = { ...options.headers };
    this.timeout = options.timeout;
    this.interceptors = { request: [...(options.interceptors?.request ?? [])], response: [...(options.interceptors?.response ?? [])] };
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** Starts an exchange with the fetcher's default headers merged under the request's own. */
  createExchange(request: FetchRequest, resultExtractor: ResultExtractor): FetchExchange {
    const headers = { ...this.headers, ...request.headers };
    return { fetcher: this, request: { ...request, headers }, resultExtractor, attributes: new Map() };
  }

  /**
   * Runs an exchange: request interceptors, `fetch`, response interceptors, status check (non-2xx throws
   * {@link HttpStatusError} with the parsed body), then the result extractor. Nothing is retried.
   */
  async exchange(exchange: FetchExchange): Promise<unknown> {
    // One spelling per name before the interceptors run, so that a header an interceptor sets (in whatever case) is
    // the one set last, and sent (a client's `authorization` used to win over the interceptor's `Authorization`,
    // which only replaced the value of the fetcher's key, set before it).
    exchange.request.headers = lastOfEachName(exchange.request.headers);
    for (const intercept of this.interceptors.request) await intercept(exchange);
    const request = exchange.request;
    const url = resolveURL(this.baseURL, request.url);
    const timeout = request.timeout ?? this.timeout;
    // Infinity means no deadline; `setTimeout` would turn it (like any delay over 2^31 - 1 ms) into 1 ms, and so would
    // NaN (a timeout read from an unset environment variable).
    if (timeout === undefined || !(timeout > 0) || timeout === Infinity) return this.#send(exchange, url, request.signal);

    // The timer aborts the fetch (and a JSON body read); a stream extractor returns before the body is read,
    // so a stream only has the deadline until its headers, and `finally` clears the timer.
    const timer = new AbortController();
    const fired = new TimeoutError(timeout, request.method, url);
    const handle = setTimeout(() => timer.abort(fired), Math.min(timeout, MAX_TIMER_DELAY));
    const signal = request.signal ? AbortSignal.any([request.signal, timer.signal]) : timer.signal;
    try {
      return await this.#send(exchange, url, signal);
    } catch (error) {
      // a status error whose body the deadline cut keeps its status (the timeout is its cause)
      throw timer.signal.aborted && !(error instanceof HttpStatusError) ? fired : error;
    } finally {
      clearTimeout(handle);
    }
  }

  async #send(exchange: FetchExchange, url: string, signal: AbortSignal | undefined): Promise<unknown> {
    const request = exchange.request;
    request.headers = lastOfEachName(request.headers);
    checkHeaderValues(request.headers);
    const init: RequestInit & { duplex?: "half" } = { method: request.method, headers: request.headers, signal };
    if (request.body !== undefined && request.body !== null) {
      init.body = encodeBody(request.body, request.headers);
      if (init.body instanceof ReadableStream) init.duplex = "half";
    }
    exchange.url = url;
    try {
      exchange.response = await this.#fetch(url, init);
    } catch (error) {
      throw toNetworkError(error, url, signal);
    }
    for (const intercept of this.interceptors.response) await intercept(exchange);
    const response = exchange.response;
    if (!response.ok) throw await statusError(response, url, signal);
    return exchange.resultExtractor(exchange);
  }
}

/**
 * fetch refuses a URL with a user name or password in it — on every call, in an error that quotes the URL, password
 * and all. Refused here, once, without quoting it.
 */
function refuseCredentials(baseURL: string): void {
  const url = URL.canParse(baseURL) ? new URL(baseURL) : undefined;
  if (url && (url.username !== "" || url.password !== "")) {
    throw new TypeError(`baseURL must not carry credentials (user:password@${url.host}): fetch refuses such URLs; send them in a header (Authorization) instead`);
  }
}

/**
 * The error of a non-2xx response, with its body. A body that cannot be read whole (the connection cut, the deadline
 * passed) still gives the status error, with `""` as its body and that failure as its cause: the status and request id
 * had arrived, and a 429 reported as a NetworkError would be retried as one. A caller's own abort keeps its reason.
 */
async function statusError(response: Response, url: string, signal: AbortSignal | undefined): Promise<unknown> {
  try {
    return new HttpStatusError(response, await readBody(response, url, signal), url);
  } catch (cause) {
    if (signal?.aborted && !(signal.reason instanceof TimeoutError)) return signal.reason;
    return new HttpStatusError(response, "", url, { cause: signal?.aborted ? signal.reason : cause });
  }
}

/**
 * Header names are case-insensitive: of names that differ only in case (a client's `authorization` over its fetcher's
 * `Authorization`, or one an interceptor wrote), the one set last is sent. fetch would send both, joined ("Bearer a,
 * Bearer b"): the provider refused it, and the key meant to be replaced went out too.
 */
function lastOfEachName(headers: Record<string, string> | undefined): Record<string, string> {
  const byName = new Map<string, string>();
  for (const name in headers) {
    const lower = name.toLowerCase();
    const earlier = byName.get(lower);
    if (earlier !== undefined && earlier !== name) delete headers[earlier];
    byName.set(lower, name);
  }
  return headers ?? {};
}

// What fetch takes as a header value: Latin-1 without CR, LF or NUL.
const HEADER_VALUE = /^[^\r\n\0\u0100-\uffff]*$/;

/**
 * Refuses a header value fetch would refuse, before fetch does: its error quotes the value, and the value is often
 * the API key (a key pasted with its line break), which would then be in every log line of the error.
 */
function checkHeaderValues(headers: Record<string, string> | undefined): void {
  for (const name in headers) {
    const value = headers[name];
    if (typeof value === "string" && !HEADER_VALUE.test(value)) {
      throw new TypeError(`Header ${JSON.stringify(name)} holds a character a header cannot carry (a line break, NUL or one beyond Latin-1); its value is not shown, as it may be a secret such as the API key`);
    }
  }
}

/**
 * Joins `baseURL` and a relative path with exactly one `/`; absolute URLs are used as they are. A query on `baseURL`
 * (Azure's `?api-version=…`) stays a query: the path goes before it, and a query of the path's own is added to it.
 */
export function resolveURL(baseURL: string, path: string): string {
  if (/^[a-z][a-z\d+.-]*:/i.test(path) || baseURL === "") return path;
  const hash = baseURL.indexOf("#"); // a fragment is never sent; a path after it would not be either
  const base = hash < 0 ? baseURL : baseURL.slice(0, hash);
  const q = base.indexOf("?");
  const [basePath, baseQuery] = q < 0 ? [base, ""] : [base.slice(0, q), base.slice(q + 1)];
  let end = basePath.length;
  while (end > 0 && basePath.charCodeAt(end - 1) === 47) end--;
  let start = 0;
  while (start < path.length && path.charCodeAt(start) === 47) start++;
  const joined = `${basePath.slice(0, end)}/${path.slice(start)}`;
  if (baseQuery === "") return joined;
  return `${joined}${joined.includes("?") ? "&" : "?"}${baseQuery}`;
}

/**
 * What fetch cannot send as it is becomes JSON (adding `Content-Type` unless one is set): plain objects and arrays, and
 * instances of a class of the caller's (a request built by a class was sent as "[object Object]"). Strings, binary
 * data, forms, URL parameters and streams (async iterables too) pass through.
 */
function encodeBody(body: unknown, headers: Record<string, string>): BodyInit {
  if (typeof body !== "object" || body === null || isBodyInit(body)) return body as BodyInit;
  if (!hasHeader(headers, "content-type")) headers["Content-Type"] = "application/json";
  return JSON.stringify(body);
}

function isBodyInit(value: object): boolean {
  return (
    ArrayBuffer.isView(value) ||
    value instanceof ArrayBuffer ||
    value instanceof Blob ||
    value instanceof FormData ||
    value instanceof URLSearchParams ||
    value instanceof ReadableStream ||
    Symbol.asyncIterator in value || // Node's fetch streams an async iterable of bytes
    (typeof SharedArrayBuffer !== "undefined" && value instanceof SharedArrayBuffer)
  );
}

function hasHeader(headers: Record<string, string>, lowerName: string): boolean {
  for (const name in headers) if (name.toLowerCase() === lowerName) return true;
  return false;
}

