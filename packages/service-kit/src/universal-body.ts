// Connect's universal handlers answer with a body that is an async iterable of chunks; the wrappers that correct
// what Connect writes on the wire (request-errors.ts, grpc/wire-fixes.ts) rewrite it through this one function.

/**
 * The body with each chunk passed through `chunkFix` (awaited when it returns a promise), and `onEnd` run once it has
 * ended (or failed). next/throw/return go straight to Connect's iterator, which aborts the call on them.
 */
export function mapBody(body: AsyncIterable<Uint8Array>, chunkFix?: (chunk: Uint8Array) => Uint8Array | Promise<Uint8Array>, onEnd?: () => void): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const it = body[Symbol.asyncIterator]();
      const step = async (result: Promise<IteratorResult<Uint8Array>>): Promise<IteratorResult<Uint8Array>> => {
        try {
          const r = await result;
          if (r.done) onEnd?.();
          else if (chunkFix) {
            const value = chunkFix(r.value);
            // a fix that has to wait (inflating a compressed frame) is awaited; the others cost no extra turn
            return value instanceof Promise ? { done: false, value: await value } : { done: false, value };
          }
          return r;
        } catch (err) {
          onEnd?.();
          throw err;
        }
      };
      return {
        next: () => step(it.next()),
        throw: (err?: unknown) => step(it.throw ? it.throw(err) : Promise.reject(err)),
        return: (value?: unknown) => step(it.return ? it.return(value) : Promise.resolve({ done: true as const, value })),
      };
    },
  };
}
