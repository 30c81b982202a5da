import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Refuses JSON text that names the key `__proto__`. protobuf-es keeps a map field in a plain object, where that key
 * cannot be stored: `{"metadata": {"__proto__": "x"}}` would be answered `true` with the entry silently gone. Read as
 * text, before parsing: a substring test costs next to nothing, where a walk of the parsed value would cost every call.
 */
export function refuseLostKeys(json: string | Buffer): void {
  // a Buffer is searched as bytes, not decoded first (a JSON import carries megabytes of base64)
  if (json.includes('"__proto__"')) {
    throw new ConnectError(`the key "__proto__" cannot be stored (it names the prototype of a JavaScript object, so it would be lost): choose another key`, Code.InvalidArgument);
  }
}
