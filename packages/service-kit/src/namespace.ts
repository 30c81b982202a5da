import { Code, ConnectError } from "@connectrpc/connect";
import { excerpt } from "./excerpt.js";
import { invisibleCharacterIn, withInvisibleWrittenOut } from "./invisible-characters.js";

export interface NamespaceRule {
  /** gov.namespace.require-hash-tag: false lifts the check (standalone storage only). */
  requireHashTag: boolean;
}

/** Names the current-namespace routes (GET /v1/namespaces/current, PUT /v1/namespaces/current/{ns}), never a namespace. */
export const RESERVED_NAMESPACE = "current";

/** The longest namespace name (in UTF-16 code units, as `string.length` counts). */
export const MAX_NAMESPACE_LENGTH = 256;
const MAX_LENGTH = MAX_NAMESPACE_LENGTH;

/**
 * Whitespace, ":", C0 and C1 controls, and the bidirectional controls that make text display in an order other than
 * its own (a namespace shown in a dashboard, a log or an audit entry must read as what it is).
 */
const FORBIDDEN = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\s:]/;

/**
 * Redis Cluster hashes only what stands between the FIRST "{" and the first "}" after it, and hashes the whole key
 * when that is empty; so "{dev}", "cosky-{dev}" and "team-{a}-x" are tagged, while "dev" and "{}{dev}" are not.
 */
function hasHashTag(name: string): boolean {
  const open = name.indexOf("{");
  if (open < 0) return false;
  const close = name.indexOf("}", open + 1);
  return close > open + 1;
}

/**
 * Contract §2: namespaces are used verbatim as key prefixes, so they must carry a Redis Cluster hash tag;
 * the server never adds or removes braces. Throws invalid_argument with the rule explained.
 */
export function checkNamespace(namespace: string, rule: NamespaceRule): void {
  if (!namespace) throw new ConnectError("namespace is required: give a name with a hash tag such as {dev}", Code.InvalidArgument);
  if (namespace.length > MAX_LENGTH || FORBIDDEN.test(namespace)) {
    // ":" separates the namespace from the rest of a key: allowing it would let two namespaces share keys.
    throw new ConnectError(
      `namespace "${excerpt(namespace.slice(0, 64))}" is not allowed: use at most ${MAX_LENGTH} characters without spaces, ":", control characters or bidirectional text controls`,
      Code.InvalidArgument,
    );
  }
  if (rule.requireHashTag && !hasHashTag(namespace)) {
    // "%7Bdev%7D" arrived still encoded: the client encoded the braces twice (it sent "%257Bdev%257D").
    if (/%7B|%7D/i.test(namespace)) {
      throw new ConnectError(
        `namespace "${namespace.slice(0, 64)}" still holds percent-escapes of "{" and "}" after the URL was decoded: it was percent-encoded twice; encode it once ({dev} is %7Bdev%7D in a URL)`,
        Code.InvalidArgument,
      );
    }
    // Suggest a tag built from the name's own letters: "{}" must not become "{{}}", which is no better.
    const base = namespace.replace(/[{}]/g, "") || "dev";
    const same = namespace.includes("{") || namespace.includes("}") ? "" : ` "${namespace}" and "{${namespace}}" are different namespaces.`;
    throw new ConnectError(
      `namespace "${namespace}" has no hash tag: a namespace must contain a non-empty brace-enclosed tag (its first "{...}" counts), ` +
        `e.g. "{${base}}" or "cosky-{${base}}", so that all of its keys share one Redis Cluster slot. ` +
        `The server uses names exactly as given and never adds braces.${same}`,
      Code.InvalidArgument,
    );
  }
}

/**
 * {@link checkNamespace}, and no character that does not show: for the calls that create a namespace or write data
 * into it (config writes and imports, registrations, creating it, making it current). "{dev}" followed by a zero-width
 * space shows as "{dev}" in every list, log and message, yet is another namespace (other data, other role bindings). A
 * namespace created with one before this rule is still read, renewed into, exported and deleted with checkNamespace,
 * so that its data can be moved and the name retired.
 */
export function checkNewNamespace(namespace: string, rule: NamespaceRule): void {
  checkNamespace(namespace, rule);
  // Only reachable with require-hash-tag=false ("current" has no tag). /v1/namespaces/current is the current-namespace
  // route, so the namespace service refuses the name (it could be neither deleted nor made current): a config or a
  // registration written into it made a namespace that GET /v1/namespaces listed and no DELETE could ever remove.
  if (namespace === RESERVED_NAMESPACE) {
    throw new ConnectError(
      `"${RESERVED_NAMESPACE}" cannot name a namespace: /v1/namespaces/current is the current-namespace route, so a namespace of that name could not be deleted or made current; use another name`,
      Code.InvalidArgument,
    );
  }
  const invisible = invisibleCharacterIn(namespace);
  if (invisible) {
    throw new ConnectError(
      `namespace "${excerpt(withInvisibleWrittenOut(namespace.slice(0, 64)))}" contains ${invisible}, a character that does not show (a zero-width or format character): remove it`,
      Code.InvalidArgument,
    );
  }
}

/** Whether {@link checkNamespace} accepts `namespace`: for a name a caller supplies that is not refused but skipped. */
export function isValidNamespace(namespace: string, rule: NamespaceRule): boolean {
  try {
    checkNamespace(namespace, rule);
    return true;
  } catch {
    return false;
  }
}
