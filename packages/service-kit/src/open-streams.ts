import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { parseInteger, type SettingDef } from "@gov/settings";

export const openWatchesSetting = {
  name: "gov.limits.open-watches",
  parse: parseInteger(1, 10_000_000),
  default: 10_000,
  doc: "most watches (server streams: SSE, Connect, gRPC) a process holds open at once; one more is refused with 429 / `resource_exhausted` before it starts",
} as SettingDef<number>;

/**
 * Holds the streaming calls a process has open to `max`: a watch costs its process memory for as long as it stays open
 * (~30 KB each: 3,000 SSE watches took ~93 MB), and nothing else bounded how many a client may open. One more is
 * refused before it starts — no subscription, no first read — with `resource_exhausted` (429 on REST) naming the
 * setting. Unary calls pass straight through, without a step of their own.
 *
 * A stream counts from the moment it is admitted until its messages end, fail, or its reader stops (`return`), whichever
 * comes first, also when the reader stops before reading anything.
 */
export function limitOpenStreams(max: number, setting = openWatchesSetting.name) {
  let open = 0;
  const interceptor: Interceptor = (next) => (req) => {
    if (!req.stream) return next(req);
    if (open >= max) {
      return Promise.reject(new ConnectError(`too many open watches: this process holds ${open}, the limit (${setting}); close a watch you no longer read, or raise the limit`, Code.ResourceExhausted));
    }
    open++;
    let counted = true;
    const release = () => {
      if (counted) open--;
      counted = false;
    };
    return next(req).then(
      (res) => (res.stream ? { ...res, message: releasedAtEnd(res.message, release) } : (release(), res)),
      (err: unknown) => {
        release();
        throw err;
      },
    );
  };
  return { interceptor, open: () => open };
}

/** `stream`, calling `release` once when it ends, fails or its reader returns (started or not). */
function releasedAtEnd<T>(stream: AsyncIterable<T>, release: () => void): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      const it = stream[Symbol.asyncIterator]();
      return {
        async next() {
          try {
            const result = await it.next();
            if (result.done) release();
            return result;
          } catch (err) {
            release();
            throw err;
          }
        },
        async return(value?: unknown) {
          release();
          return (await it.return?.(value)) ?? { done: true, value: undefined };
        },
        async throw(err?: unknown) {
          release();
          if (it.throw) return it.throw(err);
          throw err;
        },
      };
    },
  };
}
