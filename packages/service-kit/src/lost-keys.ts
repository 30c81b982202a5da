import { Code, ConnectError } from "@connectrpc/connect";

const lostKey = () =>
  new ConnectError(`the key "__proto__" cannot be stored (it names the prototype of a JavaScript object, so it would be lost): choose another key`, Code.InvalidArgument);

/** Stops the parse below at the first member named `__proto__`, however its name was spelled in the text. */
const refuseProtoMember = (key: string, value: unknown) => {
  if (key === "__proto__") throw lostKey();
  return value;
};

/**
 * Refuses JSON text that names the key `__proto__`. protobuf-es keeps a map field in a plain object, where that key
 * cannot be stored: `{"metadata": {"__proto__": "x"}}` would be answered `true` with the entry silently gone.
 *
 * A substring test alone was wrong both ways: a JSON escape spells the same key without the substring
 * (`{"\u005f_proto__": "x"}` was answered `true`, the entry gone), and a *value* "__proto__" (a role of that name in
 * `PATCH /v1/users/{u}/role`, a password, a metadata value) was refused as a key. So the text is parsed, its member
 * names looked at, only when it could hold such a key — it holds `__proto__` or a `\u` escape — which a usual body
 * (a config's base64, plain names) does not: the common case still costs a substring search. Invalid JSON is left to
 * the parser that follows, which says what is wrong with it.
 */
export function refuseLostKeys(json: string | Buffer): void {
  // a Buffer is searched as bytes, not decoded first (a JSON import carries megabytes of base64)
  if (!json.includes("__proto__") && !json.includes("\\u")) return;
  const text = typeof json === "string" ? json : json.toString("utf8");
  try {
    JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text, refuseProtoMember);
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    // not JSON: the caller's parser refuses it with its own message
  }
}
