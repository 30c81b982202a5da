/**
 * Request headers of an in-process call: a real `Headers` (so `{ ...req }`, `instanceof Headers`, `new Headers(h)`
 * and `fetch(url, { headers: h })` behave as for a network call) that copies the caller's init only when first read
 * or written. Validating and copying even three headers costs ~0.9 µs, more than the rest of an in-process call, and
 * most calls are never asked for their headers. Every public method fills first, so the laziness cannot be observed
 * (except that an invalid header name in the init throws on first use instead of at the call).
 */
const PLAIN_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
/**
 * The last value found plain: a client sends the same token on every call, and comparing it with the last one is
 * cheaper than testing its ~300 characters again (~0.4 µs of a config GET with a token, profiled).
 */
let lastPlain: string | undefined;
const isPlain = (value: string): boolean => {
  if (value === lastPlain) return true;
  if (!PLAIN_VALUE.test(value)) return false;
  lastPlain = value;
  return true;
};

export class CallerHeaders extends Headers {
  #init: HeadersInit | undefined;

  constructor(init: HeadersInit | undefined) {
    super();
    this.#init = init;
  }

  #fill(): void {
    const init = this.#init;
    if (init === undefined) return;
    this.#init = undefined;
    if (Array.isArray(init)) {
      for (const [name, value] of init) super.append(name, value);
    } else if (init instanceof Headers) {
      init.forEach((value, name) => super.append(name, value));
    } else {
      const record = init as Record<string, string>;
      for (const name of Object.keys(record)) super.append(name, record[name]);
    }
  }

  override get(name: string): string | null {
    const quick = this.#peek(name);
    if (quick !== undefined) return quick;
    this.#fill();
    return super.get(name);
  }

  /**
   * `get` without filling, when the answer is certain: a record init holding exactly this (lower-case) name once, with
   * a value `Headers` would return unchanged (visible ASCII, no surrounding blanks), or not holding it in any spelling.
   * The authorization interceptor reads one header on every call; validating and copying all of them (a bearer token is ~300 bytes) doubled the cost
   * of an in-process call.
   */
  #peek(name: string): string | null | undefined {
    const init = this.#init;
    if (init === undefined || Array.isArray(init) || init instanceof Headers || name !== name.toLowerCase()) return undefined;
    const record = init as Record<string, string>;
    const value = record[name];
    if (value === undefined) {
      // absent for certain unless another spelling of the name is there (an optional header, read on every call)
      for (const key in record) if (key.toLowerCase() === name) return undefined;
      return null;
    }
    if (typeof value !== "string" || !isPlain(value)) return undefined;
    for (const key in record) if (key !== name && key.toLowerCase() === name) return undefined; // Headers would join them
    return value;
  }
  override has(name: string): boolean {
    this.#fill();
    return super.has(name);
  }
  override set(name: string, value: string): void {
    this.#fill();
    super.set(name, value);
  }
  override append(name: string, value: string): void {
    this.#fill();
    super.append(name, value);
  }
  override delete(name: string): void {
    this.#fill();
    super.delete(name);
  }
  override getSetCookie(): string[] {
    this.#fill();
    return super.getSetCookie();
  }
  override forEach(callback: (value: string, key: string, parent: Headers) => void, thisArg?: unknown): void {
    this.#fill();
    super.forEach(callback, thisArg);
  }
  override keys(): HeadersIterator<string> {
    this.#fill();
    return super.keys();
  }
  override values(): HeadersIterator<string> {
    this.#fill();
    return super.values();
  }
  override entries(): HeadersIterator<[string, string]> {
    this.#fill();
    return super.entries();
  }
  override [Symbol.iterator](): HeadersIterator<[string, string]> {
    this.#fill();
    return super.entries();
  }
}

/** True when `init` carries no header at all, so a plain empty `Headers` will do. */
export function isEmptyHeadersInit(init: HeadersInit | undefined): boolean {
  if (init === undefined) return true;
  if (Array.isArray(init)) return init.length === 0;
  if (init instanceof Headers) return false;
  for (const _ in init) return false;
  return true;
}
