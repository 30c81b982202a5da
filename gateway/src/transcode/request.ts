import { gunzip, inflate, brotliDecompress, type InputType, type ZlibOptions, type BrotliOptions } from "node:zlib";
import { create, fromJson, isFieldSet, ScalarType, type DescField, type DescMessage, type JsonValue, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyRequest } from "fastify";
import { decodeHint, parserMessage, refuseLostKeys } from "@gov/service-kit";
import { bodyOverLimit, excerpt, HttpError, JSON_BODY_SETTING, JSON_TYPE, routeBodyLimit } from "../errors.js";
import { isSecret, type RestRoute } from "./rest-routes.js";

const invalid = (message: string) => new ConnectError(message, Code.InvalidArgument);
// ignoreBOM: a leading BOM is content and is stored as sent (the default decoder would drop it).
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

type Inflate = (buf: InputType, options: ZlibOptions & BrotliOptions, callback: (err: Error | null, result: Buffer) => void) => void;
const DECODERS: Record<string, Inflate> = { gzip: gunzip, "x-gzip": gunzip, deflate: inflate, br: brotliDecompress };

/**
 * The REST body parser: the raw bytes, with a `Content-Encoding` (gzip, deflate, br) undone. The inflated size counts
 * against the same limit as a plain body — the route's own (gov.limits.json-body for JSON, the service's for raw
 * content; `setting` names it for a route without one) — and inflating stops at that limit, so a small bomb costs no
 * more than a body at the limit.
 */
export function rawBodyReader(setting = JSON_BODY_SETTING) {
  return (req: FastifyRequest, body: Buffer, done: (err: Error | null, body?: Buffer) => void): void => readRawBody(req, body, done, setting);
}

function readRawBody(req: FastifyRequest, body: Buffer, done: (err: Error | null, body?: Buffer) => void, setting: string): void {
  const header = req.headers["content-encoding"];
  if (header === undefined) {
    // the common case: no string work. Raw content sent without a declared length (chunked) was read up to its
    // JSON-string limit (see jsonStringBytes); as sent, it is held to its own.
    const own = (req.routeOptions.config as { contentBytes?: number } | undefined)?.contentBytes;
    if (own !== undefined && body.length > own && !JSON_TYPE.test(req.headers["content-type"] ?? "")) return done(tooLarge(req, body.length, setting));
    return done(null, body);
  }
  const encoding = String(header).trim().toLowerCase();
  if (encoding === "identity" || encoding === "") return done(null, body);
  const decode = DECODERS[encoding];
  if (!decode) return done(new HttpError(415, "invalid_argument", `Content-Encoding "${encoding.slice(0, 40)}" is not supported: send the body as is, or with gzip, deflate or br`));
  const limit = limitOf(req, setting);
  decode(body, { maxOutputLength: limit.bytes }, (err, inflated) => {
    if (!err) return done(null, inflated);
    if ((err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE" || err instanceof RangeError) {
      return done(new HttpError(413, "resource_exhausted", `the request body inflates to more than the limit of ${limit.bytes} bytes (${limit.setting}): send a smaller body`));
    }
    done(new HttpError(400, "invalid_argument", `the body is not valid ${encoding} data, as its Content-Encoding says`));
  });
}

/** The body limit that applies to this request: its route's (see routeBodyLimit), else Fastify's with `setting`. */
const limitOf = (req: FastifyRequest, setting: string) => routeBodyLimit(req) ?? { bytes: req.routeOptions.bodyLimit, setting };

/** The 413 of a body over the limit that applies to it, with its size. */
export function tooLarge(req: FastifyRequest, bytes: number, setting = JSON_BODY_SETTING): HttpError {
  return new HttpError(413, "resource_exhausted", bodyOverLimit(bytes, limitOf(req, setting)));
}

/** A path or query string → the field's scalar value, or a 400 that says what was expected. */
function scalarFromText(field: DescField, text: string): unknown {
  if (field.fieldKind !== "scalar") throw invalid(`${field.jsonName} cannot be given in the path or query`);
  switch (field.scalar) {
    case ScalarType.STRING:
      return text;
    case ScalarType.BOOL:
      if (text === "true" || text === "false") return text === "true";
      throw invalid(`${field.jsonName} must be true or false, not "${excerpt(text)}"`);
    // Text that is no number at all is told so; the type's range is named only for a number outside it, since the
    // service names the range it takes itself (a version: 1 to 2147483647), which may be narrower than the type's.
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return wholeNumber(field, text, -2147483648, 2147483647);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return wholeNumber(field, text, 0, 4294967295);
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      if (!/^-?\d{1,19}$/.test(text)) throw invalid(`${field.jsonName} must be a whole number, not "${excerpt(text)}"`);
      return BigInt(text);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT: {
      const n = Number(text);
      if (text.trim() === "" || Number.isNaN(n)) throw invalid(`${field.jsonName} must be a number, not "${excerpt(text)}"`);
      return n;
    }
    default:
      throw invalid(`${field.jsonName} cannot be given in the path or query`);
  }
}

function wholeNumber(field: DescField, text: string, min: number, max: number): number {
  if (!/^-?\d+$/.test(text)) throw invalid(`${field.jsonName} must be a whole number, not "${excerpt(text)}"`);
  const digits = text.replace(/^(-?)0+(?=\d)/, "$1");
  const n = digits.length <= 11 ? Number(digits) : NaN; // a longer number is out of range: not parsed at all
  // Only the bound that was crossed: the field's own range may be narrower (a version is 1 to 2147483647, a page's
  // limit at most 1000) and is the service's to name, so "from -2147483648" would mislead.
  if (!(n >= min && n <= max)) throw invalid(`${field.jsonName} must be ${digits.startsWith("-") ? `at least ${min}` : `at most ${max}`}, not "${excerpt(text)}"`);
  return n;
}

function fieldByName(schema: DescMessage, name: string): DescField | undefined {
  return schema.fields.find((f) => f.jsonName === name || f.name === name);
}

/** The raw body as text for a string body field; a JSON string body (Content-Type: application/json) is unwrapped. */
function textBody(req: FastifyRequest, field: DescField): string {
  if (/^multipart\//i.test(req.headers["content-type"] ?? "")) {
    // The form's text is an envelope, not the content: storing it would store boundaries and part headers.
    throw new HttpError(415, "invalid_argument", `the ${field.jsonName} is the raw request body, not a form: send the file's bytes as the body (curl --data-binary @file)`);
  }
  const raw = req.body;
  // Empty content is content (an empty file), as on Connect and gRPC, where data "" is a valid message.
  if (!Buffer.isBuffer(raw) || raw.length === 0) return "";
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw invalid(`the request body is not UTF-8 text: configs hold text; convert it to UTF-8 (e.g. iconv -t UTF-8), or store binary data base64-encoded`);
  }
  if (JSON_TYPE.test(req.headers["content-type"] ?? "") && text.trimStart().startsWith('"')) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed === "string") {
        // JSON escapes can spell half of a UTF-16 pair ("\ud800"), which no UTF-8 text holds: stored, it would come
        // back as U+FFFD, not as sent. Connect and gRPC refuse such a string field too.
        if (!parsed.isWellFormed()) throw invalid(`the JSON string holds a lone surrogate escape (\\ud800–\\udfff without its pair), which UTF-8 text cannot hold: send the pair, or the raw text`);
        return parsed;
      }
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      // not a JSON string after all: the content is the text as sent
    }
  }
  return text;
}

/**
 * The body parsed as JSON; undefined when there is none. `hint` ends the message of a parse error, which never quotes
 * the body (it may hold a password). A leading byte-order mark is skipped, as JSON parsers may (RFC 8259 §8.1).
 */
function parsedBody(req: FastifyRequest, hint = ": send a JSON object (Content-Type: application/json)"): JsonValue | undefined {
  const raw = req.body;
  if (!Buffer.isBuffer(raw) || raw.length === 0) return undefined;
  const text = raw.toString("utf8");
  refuseLostKeys(text);
  try {
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text) as JsonValue;
  } catch (err) {
    throw invalid(`the request body is not valid JSON (${parserMessage((err as Error).message, 120)})${hint}`);
  }
}

function jsonBody(req: FastifyRequest, schema: DescMessage): Message {
  const json = parsedBody(req);
  if (json === undefined) return create(schema);
  try {
    return fromJson(schema, json);
  } catch (err) {
    throw invalid(`the request body does not match ${schema.name}: ${decodeHint(parserMessage((err as Error).message), schema)}`);
  }
}

/** A JSON value's kind, as a message names it (never the value itself, which may be large). */
const jsonKind = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "an array" : typeof v === "object" ? "an object" : `a ${typeof v}`);

/**
 * A rule whose `body` names a map, message or repeated field: the request body is that field's JSON, bare
 * (`{"zone": "a"}` for a map<string, string> field, not `{"metadata": {"zone": "a"}}`; `["dev"]` for a list). An absent body is refused, not
 * read as an empty map: a PUT that replaces the whole field must say what it is to become.
 */
function fieldJsonBody(req: FastifyRequest, schema: DescMessage, field: DescField): unknown {
  const list = field.fieldKind === "list";
  const noun = fieldNoun(field);
  const example = list ? '["a", "b"] ([] for none)' : field.fieldKind === "map" ? '{"key": "value"} ({} for none)' : "a JSON object";
  const json = parsedBody(req, `: send the ${noun} as ${example}`);
  if (json === undefined) throw invalid(`the request body is the ${noun} itself, as JSON: send ${example}`);
  const wrapper = wrapperKey(schema, field, json);
  if (wrapper !== undefined) {
    // The commonest slip (the field sent as in a whole-message body): "quote it" or "not a valid …" would not say so.
    const inner = (json as Record<string, JsonValue>)[wrapper];
    throw invalid(
      `the request body is the ${noun} itself, not an object holding it: send ${shownInner(field, inner)}, not {${JSON.stringify(wrapper)}: ${list ? "[...]" : "{...}"}}`,
    );
  }
  if (json === null || typeof json !== "object" || Array.isArray(json) !== list) {
    throw invalid(`the request body is ${jsonKind(json)}: the body is the ${noun} itself, ${example}`);
  }
  if (field.fieldKind === "map" && field.mapKind === "scalar" && field.scalar === ScalarType.STRING) {
    for (const [key, value] of Object.entries(json)) {
      if (typeof value === "string") continue;
      throw invalid(
        `the value of ${JSON.stringify(excerpt(key))} is ${jsonKind(value)}: ${field.jsonName} values are strings, so quote it (${JSON.stringify(excerpt(key))}: "…"). ` +
          `The body is the ${noun} itself, e.g. {"zone": "a"}`,
      );
    }
  }
  try {
    return (fromJson(schema, { [field.jsonName]: json }) as unknown as Record<string, unknown>)[field.localName];
  } catch (err) {
    throw invalid(`the request body is not a valid ${noun}: ${parserMessage((err as Error).message.replace(/cannot decode field (?:\S+\.)?(\w+) from JSON: /g, "$1: "))}`);
  }
}

/** The body field as a message names it: "list of roleNames", "metadata map", "instance" (a JSON name alone reads as a thing, not a list or map). */
function fieldNoun(field: DescField): string {
  if (field.fieldKind === "list") return `list of ${field.jsonName}`;
  if (field.fieldKind === "map") return `${field.jsonName} map`;
  return field.jsonName;
}

/**
 * The key, when the body is the field wrapped in an object of its own (`{"metadata": {...}}`, `{"roleNames": [...]}`):
 * one key, the field's JSON or proto name, holding the field's kind of value, and the body does not decode as the
 * field as it is (a map key or a message's own field may carry the same name).
 */
function wrapperKey(schema: DescMessage, field: DescField, json: JsonValue): string | undefined {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return undefined;
  const keys = Object.keys(json);
  if (keys.length !== 1 || (keys[0] !== field.jsonName && keys[0] !== field.name)) return undefined;
  const inner = json[keys[0]];
  if (inner === null || typeof inner !== "object" || Array.isArray(inner) !== (field.fieldKind === "list")) return undefined;
  try {
    fromJson(schema, { [field.jsonName]: json });
    return undefined;
  } catch {
    return keys[0];
  }
}

/**
 * What to send instead of the wrapper: the inner list or map as sent, when short; a message's JSON is never echoed
 * (it may hold a password), nor a long value (a message says what to do, it does not repeat the body).
 */
function shownInner(field: DescField, inner: JsonValue): string {
  const list = field.fieldKind === "list";
  if (field.fieldKind !== "message") {
    const text = list
      ? `[${(inner as JsonValue[]).map((v) => JSON.stringify(v)).join(", ")}]`
      : `{${Object.entries(inner as Record<string, JsonValue>).map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)}`).join(", ")}}`;
    if (text.length <= 80) return excerpt(text);
  }
  return `the ${list ? "list" : "object"} inside`;
}

/** multipart/form-data: file parts fill bytes fields, text parts fill scalar fields, both by their JSON or proto name. */
async function multipartBody(req: FastifyRequest, schema: DescMessage, init: Record<string, unknown>): Promise<void> {
  await readParts(req, schema, init);
  // A form without its file is a different mistake from an empty file: say which part is missing.
  const file = schema.fields.find((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES && init[f.localName] === undefined);
  if (file) throw invalid(`the form has no file part named ${file.jsonName}: attach the file as ${file.jsonName} (curl -F ${file.jsonName}=@file)`);
}

async function readParts(req: FastifyRequest, schema: DescMessage, init: Record<string, unknown>): Promise<void> {
  for await (const part of req.parts()) {
    const field = fieldByName(schema, part.fieldname);
    if (!field) {
      // a file under another name: told below which part the file goes in
      if (part.type === "file") {
        await part.toBuffer();
        continue;
      }
      // as a JSON body's unknown key: a misspelt field (`polcy`) silently left its default in force
      throw invalid(`form part ${excerpt(part.fieldname)} is not a field of ${schema.name}: it has ${schema.fields.map((f) => f.jsonName).join(", ")}`);
    }
    if (part.type === "file") {
      if (field.fieldKind !== "scalar" || field.scalar !== ScalarType.BYTES) throw invalid(`form part ${excerpt(part.fieldname)} must be a text field, not a file`);
      if (init[field.localName] !== undefined) throw invalid(`the form has two ${field.jsonName} parts: send one`);
      init[field.localName] = await part.toBuffer();
    } else {
      const value = field.fieldKind === "scalar" && field.scalar === ScalarType.BYTES ? Buffer.from(String(part.value)) : scalarFromText(field, String(part.value));
      if (init[field.localName] !== undefined && !sameValue(init[field.localName], value)) throw givenTwice(field, "the form", init[field.localName], "the form", value);
      init[field.localName] = value;
    }
  }
}

const sameValue = (a: unknown, b: unknown) => (Buffer.isBuffer(a) && Buffer.isBuffer(b) ? a.equals(b) : a === b);
const shown = (v: unknown) => JSON.stringify(excerpt(Buffer.isBuffer(v) ? v.toString() : String(v)));

/** A field given two different values (the form and the query string, a parameter repeated): refused, never one silently chosen. */
function givenTwice(field: DescField, whereA: string, a: unknown, whereB: string, b: unknown): ConnectError {
  const where = whereA === whereB ? `twice in ${whereA}` : `by ${whereA} and by ${whereB}`;
  return invalid(`${field.jsonName} is given ${where}, with different values (${shown(a)}, ${shown(b)}): give it once`);
}

/** A query parameter's one value: repeated, it must say the same each time. */
function queryValue(field: DescField, value: string | string[]): unknown {
  if (!Array.isArray(value)) return scalarFromText(field, value);
  const values = value.map((v) => scalarFromText(field, v));
  for (const v of values) if (!sameValue(v, values[0])) throw givenTwice(field, "the query string", values[0], "the query string", v);
  return values[0];
}

/**
 * Path variables, then the body as the rule says, then query parameters for the remaining scalar fields. Synchronous
 * except for a multipart upload: the hot path (a GET, a PUT of raw text) pays no promise for it.
 */
export function buildRequest(route: RestRoute, req: FastifyRequest): Message | Promise<Message> {
  if (route.body === "*" && typeof req.isMultipart === "function") {
    if (req.isMultipart()) return buildMultipartRequest(route, req);
    // an upload route (it has a file): JSON (the file in base64, as protobuf JSON has it) or a form; raw bytes are
    // neither, and would be told they are not valid JSON
    if (Buffer.isBuffer(req.body) && req.body.length > 0 && !JSON_TYPE.test(req.headers["content-type"] ?? "")) {
      const file = route.method.input.fields.find((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES);
      const name = file?.jsonName ?? "file";
      throw new HttpError(415, "invalid_argument", `send the file as the part ${name} of a multipart/form-data body (curl -F ${name}=@archive.zip), or a JSON body with ${name} in base64 (Content-Type: application/json); not as the raw body`);
    }
  }
  const schema = route.method.input;
  if (route.body === undefined) refuseBody(route, req);
  // Read in this order, so that a request with several problems is told about the body's first, as it always was.
  const bodyField = route.body !== undefined && route.body !== "*" ? route.body : undefined;
  const fieldValue = bodyField && (bodyField.fieldKind === "scalar" ? textBody(req, bodyField) : fieldJsonBody(req, schema, bodyField));
  const msg = route.body === "*" ? jsonBody(req, schema) : create(schema);
  const query = req.query as Record<string, string | string[]>;
  const fromQuery = hasKeys(query) ? queryFields(route, query, bodyField, route.body === "*" ? givenByJson(msg) : undefined) : undefined;
  const fields = msg as unknown as Record<string, unknown>;
  for (const field of route.pathFields) {
    const value = scalarFromText(field, pathVariable(req, field));
    // A whole-message body that names a path field differently would be overruled without a word (a register into
    // another service than the body says): the same value is fine, another one is refused.
    if (route.body === "*" && isFieldSet(msg, field) && fields[field.localName] !== value) {
      throw invalid(`${field.jsonName} is given by the path (${JSON.stringify(excerpt(String(value)))}) and the body says otherwise: leave it out of the body`);
    }
    fields[field.localName] = value;
  }
  if (bodyField) fields[bodyField.localName] = fieldValue;
  if (fromQuery !== undefined) Object.assign(msg, fromQuery);
  return msg;
}

/**
 * A path variable's text. An empty one is an empty segment (`/v1/namespaces//stat`): the 404 every other path with a
 * doubled or trailing "/" gets, not a message about a missing namespace or id from deeper down.
 */
function pathVariable(req: FastifyRequest, field: DescField): string {
  const text = (req.params as Record<string, string>)[field.name];
  if (text === "") throw new HttpError(404, "not_found", `no endpoint ${req.method} ${excerpt(req.url.split("?")[0])}: a path segment is empty (a trailing or doubled "/"): remove it`);
  return text;
}

/** Bodies a client may send where none is taken: some HTTP clients send `{}` (or `null`) with every PUT or DELETE. */
const NOTHING = /^\s*(?:\{\s*\}|null)?\s*$/;

/**
 * A route whose rule takes no body refuses one that says something: its fields were silently dropped (a rollback sent
 * `{"targetVersion": 5}` rolled back to the path's version), where a field given twice is refused everywhere else.
 */
function refuseBody(route: RestRoute, req: FastifyRequest): void {
  const raw = req.body;
  if (!Buffer.isBuffer(raw) || raw.length === 0 || (raw.length <= 64 && NOTHING.test(raw.toString("latin1")))) return;
  const inPath = new Set(route.pathFields);
  const inQuery = route.method.input.fields.filter((f) => !inPath.has(f) && f.fieldKind === "scalar").map((f) => f.jsonName);
  throw invalid(
    `${route.httpMethod} ${route.documentedPath} takes no body: its fields come from the path${inQuery.length ? ` and the query string (${inQuery.join(", ")})` : ""}; send the request without one`,
  );
}

function hasKeys(o: object): boolean {
  for (const _ in o) return true;
  return false;
}

/** What a request's body already gave, for query parameters that name the same field: where, and the value. */
interface GivenByBody {
  where: string;
  valueOf(field: DescField): unknown;
}

const givenByJson = (msg: Message): GivenByBody => ({
  where: "the body",
  valueOf: (f) => (isFieldSet(msg, f) ? (msg as unknown as Record<string, unknown>)[f.localName] : undefined),
});

/**
 * Query parameters → the scalar fields they name (by JSON or proto name). Unknown parameters are ignored; fields bound
 * by the path or the body field are left alone; one the body gave too (`given`), or that is named twice, must say the
 * same each time.
 */
function queryFields(route: RestRoute, query: Record<string, string | string[]>, bodyField: DescField | undefined, given?: GivenByBody): Record<string, unknown> {
  const schema = route.method.input;
  const bound = new Set<DescField>(route.pathFields);
  if (bodyField) bound.add(bodyField);
  const init: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(query)) {
    const field = fieldByName(schema, key);
    if (!field || bound.has(field)) continue;
    if (isSecret(field)) throw invalid(`${field.jsonName} is not taken from the query string (URLs are kept in logs and histories): send it in the body`);
    const v = queryValue(field, value);
    // by its JSON name and its proto name, or in the body and in the query: once, or the same each time
    const inQuery = init[field.localName];
    const earlier = inQuery ?? given?.valueOf(field);
    if (earlier !== undefined) {
      if (!sameValue(earlier, v)) throw givenTwice(field, inQuery !== undefined ? "the query string" : given!.where, earlier, "the query string", v);
      continue;
    }
    init[field.localName] = v;
  }
  return init;
}

/** A body-"*" rule sent as multipart/form-data: the form's parts, then query parameters, then path variables. */
async function buildMultipartRequest(route: RestRoute, req: FastifyRequest): Promise<Message> {
  const schema = route.method.input;
  const init: Record<string, unknown> = {};
  await multipartBody(req, schema, init).catch((err: Error & { statusCode?: number }) => {
    // The multipart parser throws plain Errors for malformed input; those are the client's, not ours.
    if (err instanceof ConnectError || err.statusCode) throw err;
    throw invalid(`the multipart/form-data body is malformed (${err.message})`);
  });
  // A field the form gives too must say the same (`-F policy=skip` with `?policy=overwrite` was resolved silently for
  // the form, whose row then said "use policy=overwrite").
  Object.assign(init, queryFields(route, req.query as Record<string, string | string[]>, undefined, { where: "the form", valueOf: (f) => init[f.localName] }));
  for (const field of route.pathFields) init[field.localName] = scalarFromText(field, pathVariable(req, field));
  const msg = create(schema);
  Object.assign(msg, init);
  return msg;
}
