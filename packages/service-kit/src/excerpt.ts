/**
 * What could garble a message or make it read as something else: control characters, bidirectional controls, a BOM,
 * and halves of a UTF-16 pair (a cut may split one). Printable text in any script stays as it is ("zöne", not "z?ne").
 */
const UNSHOWABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Never echo what the client sent beyond a short, printable excerpt. */
export const excerpt = (text: string) => (text.length > 120 ? `${text.slice(0, 120)}…` : text).replace(UNSHOWABLE, "?");

/**
 * A parser's message about the client's input, made safe to send back. V8's `JSON.parse` quotes the text around the
 * error (`Unexpected token 'p', "password=M"... is not valid JSON`): that text is the client's — a password, say — so
 * only the kind of error is kept. protobuf-es quotes what it could not take (`key "…" is unknown`): each quoted run
 * is cut to 64 characters, and the whole message to `max`, so that a 300 KB key does not come back.
 */
export function parserMessage(text: string, max = 300): string {
  const safe = text
    .replace(/Unexpected token [^]* is not valid JSON/, "Unexpected token: not valid JSON")
    .replace(/"([^"]{65,})"/g, (_, inner: string) => `"${inner.slice(0, 64)}…"`);
  return safe.length > max ? `${safe.slice(0, max)}…` : safe;
}
