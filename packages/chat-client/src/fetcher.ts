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
    for (const intercept of this.interceptors.request) await intercept(exchange);
    const request = exchange.request;
    const url = resolveURL(this.baseURL, request.url);
    const timeout = request.timeout ?? this.timeout;
    // Infinity means no deadline; `setTimeout` would turn it (like any delay over 2^31 - 1 ms) into 1 ms.
    if (timeout === undefined || timeout <= 0 || timeout === Infinity) return this.#send(exchange, url, request.signal);

    // The timer aborts the fetch (and a JSON body read); a stream extractor returns before the body is read,
    // so a stream only has the deadline until its headers, and `finally` clears the timer.
    const timer = new AbortController();
    const fired = new TimeoutError(timeout, request.method, url);
    const handle = setTimeout(() => timer.abort(fired), Math.min(timeout, MAX_TIMER_DELAY));
    const signal = request.signal ? AbortSignal.any([request.signal, timer.signal]) : timer.signal;
    try {
      return await this.#send(exchange, url, signal);
    } catch (error) {
      throw timer.signal.aborted ? fired : error;
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
    try {
      exchange.response = await this.#fetch(url, init);
    } catch (error) {
      throw toNetworkError(error, url, signal);
    }
    for (const intercept of this.interceptors.response) await intercept(exchange);
    const response = exchange.response;
    if (!response.ok) throw new HttpStatusError(response, await readBody(response, url, signal), url);
    return exchange.resultExtractor(exchange);
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

