import { setImmediate as nextTurn } from "node:timers/promises";
import { fromBinary, ScalarType, toBinary, toJson, type DescField, type DescMessage, type JsonReadOptions, type JsonWriteOptions, type Message, type MessageShape } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, getTextEncoding, WireType } from "@bufbuild/protobuf/wire";
import type { Interceptor, StreamResponse, UnaryResponse } from "@connectrpc/connect";

/**
 * Answers that hold long lists of messages — a 6,000-instance service's list or a watch's first message — took one
 * serialization of 40–90 ms in one piece (protobuf ~14 µs and JSON ~6 µs per instance), during which the process
 * answered nothing else. Services hand out the same immutable message for an unchanged record (see perRecord), so the
 * encoding of each element is kept by its identity; an answer's lists are then joined from those encodings, and the
 * elements not yet encoded are encoded a few milliseconds at a time, between which other requests are served.
 */

/** Lists of messages shorter than this are serialized the ordinary way (joining pays only for long ones). */
export const LARGE_LIST = 128;

/** Work done between two turns of the event loop while a large answer's elements are encoded. */
const TURN_MS = 5;

type Encode<T> = (desc: DescMessage, msg: Message) => T;

/** `encode`, remembered by message identity (held weakly: a dropped record's message takes its encoding along). */
function perMessage<T>(encode: Encode<T>): Encode<T> {
  const made = new WeakMap<Message, T>();
  return (desc, msg) => {
    let out = made.get(msg);
    if (out === undefined) made.set(msg, (out = encode(desc, msg)));
    return out;
  };
}

const messageLists = new WeakMap<DescMessage, DescField[]>();

/** The fields of `desc` that are lists of messages (found once per message type: every answer asks). */
function messageListFields(desc: DescMessage): DescField[] {
  let fields = messageLists.get(desc);
  if (fields === undefined) messageLists.set(desc, (fields = desc.fields.filter((f) => f.fieldKind === "list" && f.listKind === "message")));
  return fields;
}

/** The lists of messages in `msg` with at least `least` elements; undefined when there are none. */
function listsOf(desc: DescMessage, msg: Message, least: number): DescField[] | undefined {
  let lists: DescField[] | undefined;
  for (const f of messageListFields(desc)) {
    if (((msg as unknown as Record<string, unknown[] | undefined>)[f.localName]?.length ?? 0) >= least) (lists ??= []).push(f);
  }
  return lists;
}

const largeLists = (desc: DescMessage, msg: Message) => listsOf(desc, msg, LARGE_LIST);

const stringLists = new WeakMap<DescMessage, DescField[]>();

/** The fields of `desc` that are lists of strings (found once per message type). */
function stringListFields(desc: DescMessage): DescField[] {
  let fields = stringLists.get(desc);
  if (fields === undefined) stringLists.set(desc, (fields = desc.fields.filter((f) => f.fieldKind === "list" && f.listKind === "scalar" && f.scalar === ScalarType.STRING)));
  return fields;
}

/**
 * The lists of strings of `msg` with LARGE_LIST elements or more; undefined when there are none. A namespace's 100,000
 * config ids (ListConfigs) took 90–110 ms of `toBinary` and ~50 ms of JSON in one piece, over Connect, gRPC-Web and
 * gRPC alike. Strings have no identity to remember an encoding by: they are encoded in slices, a turn between.
 */
function largeStringLists(desc: DescMessage, msg: Message): DescField[] | undefined {
  let lists: DescField[] | undefined;
  for (const f of stringListFields(desc)) {
    if (((msg as unknown as Record<string, string[] | undefined>)[f.localName]?.length ?? 0) >= LARGE_LIST) (lists ??= []).push(f);
  }
  return lists;
}

/** Whether `msg` has a list long enough to be serialized in turns: of messages, or of strings. */
const hasLargeList = (desc: DescMessage, msg: Message) => largeLists(desc, msg) !== undefined || largeStringLists(desc, msg) !== undefined;

/**
 * Encodes (and so remembers) every element of `msg`'s large lists with `encode`, letting the event loop turn every few
 * milliseconds of work; undefined — no promise, no microtask — when `msg` has no large list (the common answer), so
 * callers write `const ready = prepareLargeLists(…); if (ready) await ready;`.
 */
export function prepareLargeLists(desc: DescMessage, msg: Message, encode: Encode<unknown>): Promise<void> | undefined {
  const lists = largeLists(desc, msg);
  return lists && encodeInTurns(lists, msg, encode);
}

async function encodeInTurns(lists: DescField[], msg: Message, encode: Encode<unknown>): Promise<void> {
  const turns = turnTaker();
  for (const f of lists) {
    const elements = (msg as unknown as Record<string, Message[]>)[f.localName];
    for (let i = 0; i < elements.length; i++) {
      encode(f.message!, elements[i]);
      if ((i & 15) === 15) await turns.maybe();
    }
  }
}

/**
 * For a long loop: `maybe()` lets the event loop turn (I/O, timers, other requests) once TURN_MS of work have passed
 * since the last turn, and is undefined — no promise, no microtask — otherwise. The encoders here ask every 16 items:
 * reading the clock that often costs nothing next to the items' work, and items already made (a WeakMap lookup) go
 * through without a turn.
 */
export function turnTaker(): { maybe(): Promise<void> | undefined } {
  let since = performance.now();
  return {
    maybe() {
      if (performance.now() - since <= TURN_MS) return undefined;
      return nextTurn().then(() => void (since = performance.now()));
    },
  };
}

/**
 * `items.map(make)`; for a long list (LARGE_LIST or more) a few milliseconds at a time, as a promise. For the
 * messages of an answer made from many records (a 6,000-instance service: ~25 ms of `create` in one piece).
 */
export function mapInTurns<T, U>(items: readonly T[], make: (item: T) => U): U[] | Promise<U[]> {
  if (items.length < LARGE_LIST) return items.map(make);
  return (async () => {
    const turns = turnTaker();
    const out = new Array<U>(items.length);
    for (let i = 0; i < items.length; i++) {
      out[i] = make(items[i]);
      if ((i & 15) === 15) await turns.maybe();
    }
    return out;
  })();
}

/** Items sorted in one piece by sortInTurns before they are merged: ~0.5 ms of `sort` apiece. */
const SORT_RUN = 2048;

/** `sort`'s order without a comparator: by the items' strings, in UTF-16 code units. */
const byString = (a: unknown, b: unknown) => {
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
};

/**
 * `items.sort(compare)` (in place, stable; without `compare`, `sort`'s own order); for a long list (LARGE_LIST or more)
 * a few milliseconds at a time, as a promise: runs of SORT_RUN items sorted one by one, then merged two by two, the
 * event loop turning between. One `sort` of a namespace's 100,000 config ids held the event loop 30–130 ms, of a
 * 40,000-instance service by id 20–40 ms. Runs sort stably and merges keep the first run's item first on a tie, so the
 * result is `sort`'s exactly.
 */
export function sortInTurns<T>(items: T[], compare?: (a: T, b: T) => number): T[] | Promise<T[]> {
  if (items.length < LARGE_LIST) return items.sort(compare);
  const order = compare ?? byString;
  return (async () => {
    const turns = turnTaker();
    let runs: T[][] = [];
    for (let i = 0; i < items.length; i += SORT_RUN) {
      runs.push(items.slice(i, i + SORT_RUN).sort(compare));
      await turns.maybe();
    }
    while (runs.length > 1) {
      const merged: T[][] = [];
      for (let i = 0; i < runs.length; i += 2) merged.push(i + 1 < runs.length ? await mergeInTurns(runs[i], runs[i + 1], order, turns) : runs[i]);
      runs = merged;
    }
    const sorted = runs[0];
    for (let i = 0; i < sorted.length; i++) items[i] = sorted[i];
    return items;
  })();
}

/** Two sorted lists as one (the first's item first on a tie: stable), letting the event loop turn. */
async function mergeInTurns<T>(a: T[], b: T[], compare: (a: T, b: T) => number, turns: ReturnType<typeof turnTaker>): Promise<T[]> {
  const out = new Array<T>(a.length + b.length);
  let i = 0;
  let j = 0;
  for (let k = 0; k < out.length; k++) {
    out[k] = j >= b.length || (i < a.length && compare(a[i], b[j]) <= 0) ? a[i++] : b[j++];
    if ((k & 255) === 255) await turns.maybe();
  }
  return out;
}

/** Items of a list of strings or booleans written by one JSON.stringify in jsonArrayInTurns: ~1 ms apiece. */
const JSON_SLICE = 4096;

/**
 * `JSON.stringify(values)` for a list of strings or booleans; for a long list (LARGE_LIST or more) a few milliseconds at
 * a time, as a promise. A namespace's 100,000 config ids (3.7 MB of JSON) took 12–49 ms in one piece: here slices of
 * JSON_SLICE are written each in one piece, their texts (without the brackets) joined by commas.
 */
export function jsonArrayInTurns(values: readonly (string | boolean)[]): string | Promise<string> {
  if (values.length < LARGE_LIST) return JSON.stringify(values);
  return (async () => {
    const turns = turnTaker();
    const parts: string[] = [];
    for (let i = 0; i < values.length; i += JSON_SLICE) {
      parts.push(JSON.stringify(values.slice(i, i + JSON_SLICE)).slice(1, -1));
      await turns.maybe();
    }
    return `[${parts.join(",")}]`;
  })();
}

/** JSON text of messages, remembered by identity, for one set of JSON options. */
export interface JsonTexts {
  /** `msg` as JSON text. */
  message(desc: DescMessage, msg: Message): string;
  /** A list of messages as a JSON array, from the elements' texts. */
  list(desc: DescMessage, msgs: readonly Message[]): string;
  /**
   * `msg` as JSON text, its non-empty lists of messages joined from the elements' texts (they come last in the object:
   * JSON keys have no order). Not remembered: the message around a list is usually made per answer.
   */
  whole(desc: DescMessage, msg: Message): string;
  /**
   * `prefix`, `whole(desc, msg)` and `suffix` as UTF-8 bytes, joined and encoded a few milliseconds at a time;
   * undefined — no promise — when `msg` has no large list (then use `whole`). For the elements of a 40,000-instance
   * list, joining their texts took ~16 ms and encoding the ~9 MB text ~12 ms, each in one piece.
   */
  wholeInTurns(desc: DescMessage, msg: Message, prefix?: string, suffix?: string): Promise<Buffer> | undefined;
  /** `list(desc, msgs)` as UTF-8 bytes, made as wholeInTurns makes them; undefined when the list is not large. */
  listInTurns(desc: DescMessage, msgs: readonly Message[]): Promise<Buffer> | undefined;
}

/** Text appended piece by piece and encoded as UTF-8 in slices of about this many characters, joined once at the end. */
const SLICE_CHARS = 64 * 1024;

class Utf8Parts {
  private readonly parts: Buffer[] = [];
  private text = "";
  add(text: string): void {
    this.text += text;
    if (this.text.length >= SLICE_CHARS) this.flush();
  }
  private flush(): void {
    if (this.text.length > 0) this.parts.push(Buffer.from(this.text));
    this.text = "";
  }
  /** The bytes: one copy of the slices (~9 MB: a few milliseconds). */
  bytes(): Buffer {
    this.flush();
    return Buffer.concat(this.parts);
  }
}

export function jsonTexts(options: Partial<JsonWriteOptions>): JsonTexts {
  const message = perMessage((desc, msg) => JSON.stringify(toJson(desc, msg, options)));
  const list = (desc: DescMessage, msgs: readonly Message[]) => `[${msgs.map((m) => message(desc, m)).join(",")}]`;
  return {
    message,
    list,
    whole(desc, msg) {
      const lists = listsOf(desc, msg, 1);
      // by identity, as `message`: a watch's message shared by its watchers (a 1 MiB config to 100 SSE watchers) is
      // serialized once, not once per watcher (465 ms of one turn of the event loop)
      if (lists === undefined) return message(desc, msg);
      const head = toJson(desc, withoutLists(msg, lists), options) as Record<string, unknown>;
      for (const f of lists) delete head[f.jsonName]; // present as [] when implicit values are emitted
      return withTail(JSON.stringify(head), listsTail(list, msg, lists));
    },
    wholeInTurns(desc, msg, prefix = "", suffix = "") {
      const strings = largeStringLists(desc, msg) ?? [];
      if (largeLists(desc, msg) === undefined && strings.length === 0) return undefined;
      const lists = [...(listsOf(desc, msg, 1) ?? []), ...strings];
      return (async () => {
        const head = toJson(desc, withoutLists(msg, lists), options) as Record<string, unknown>;
        for (const f of lists) delete head[f.jsonName];
        const headText = JSON.stringify(head);
        // as withTail joins them: the head without its closing brace, then `,"name":[…]` per list
        const out = new Utf8Parts();
        out.add(prefix);
        out.add(headText.slice(0, -1));
        const turns = turnTaker();
        for (const [n, f] of lists.entries()) {
          out.add(`${n === 0 && headText === "{}" ? "" : ","}${JSON.stringify(f.jsonName)}:`);
          const values = (msg as unknown as Record<string, unknown[]>)[f.localName];
          if (f.fieldKind === "list" && f.listKind === "message") await listInto(out, f.message!, values as Message[], turns);
          else out.add(await jsonArrayInTurns(values as string[]));
        }
        out.add("}");
        out.add(suffix);
        return out.bytes();
      })();
    },
    listInTurns(desc, msgs) {
      if (msgs.length < LARGE_LIST) return undefined;
      return (async () => {
        const out = new Utf8Parts();
        await listInto(out, desc, msgs, turnTaker());
        return out.bytes();
      })();
    },
  };

  /** `[` the elements' texts, comma-separated `]` into `out`, letting the event loop turn (see turnTaker). */
  async function listInto(out: Utf8Parts, desc: DescMessage, msgs: readonly Message[], turns: ReturnType<typeof turnTaker>): Promise<void> {
    out.add("[");
    for (let i = 0; i < msgs.length; i++) {
      out.add(i === 0 ? message(desc, msgs[i]) : `,${message(desc, msgs[i])}`);
      if ((i & 15) === 15) await turns.maybe();
    }
    out.add("]");
  }
}

/** `msg` (a shallow copy) with `lists` empty. */
function withoutLists(msg: Message, lists: DescField[]): Message {
  const rest: Record<string, unknown> = { ...msg };
  for (const f of lists) rest[f.localName] = [];
  return rest as unknown as Message;
}

/** `"name":[…]` for each of `msg`'s `lists`, each after a comma: the members to append to the JSON text of the rest. */
function listsTail(list: JsonTexts["list"], msg: Message, lists: DescField[]): string {
  let tail = "";
  for (const f of lists) tail += `,${JSON.stringify(f.jsonName)}:${list(f.message!, (msg as unknown as Record<string, Message[]>)[f.localName])}`;
  return tail;
}

/** The JSON text of an object, `head`, with the members of `tail` appended. */
const withTail = (head: string, tail: string) => (head === "{}" ? `{${tail.slice(1)}}` : `${head.slice(0, -1)}${tail}}`);

/**
 * One element of a list of messages as protobuf writes it after the field's tag: its length, then its bytes. Kept in
 * that form because it is exactly what an unknown length-delimited field holds (see withEncodedLists).
 */
export const binaryElement: Encode<Uint8Array> = perMessage((desc, msg) => new BinaryWriter().bytes(toBinary(desc, msg)).finish());

/**
 * `msg` with its large lists taken out and put back as unknown fields of the same numbers holding the elements'
 * remembered encodings ({@link binaryElement}). `toBinary` writes unknown fields as they are, after the known ones, so
 * the bytes are a valid encoding of `msg` (a list's elements keep their order; a field's place among the others is
 * free in protobuf) that any reader decodes into the original lists. For binary serialization only: JSON has no
 * unknown fields.
 */
export function withEncodedLists<M extends Message>(desc: DescMessage, msg: M): M {
  const lists = largeLists(desc, msg);
  if (lists === undefined) return msg;
  const copy = { ...msg } as Record<string, unknown>;
  const unknown = [...(msg.$unknown ?? [])];
  for (const f of lists) {
    for (const element of (msg as unknown as Record<string, Message[]>)[f.localName]) {
      unknown.push({ no: f.number, wireType: WireType.LengthDelimited, data: binaryElement(f.message!, element) });
    }
    copy[f.localName] = [];
  }
  copy.$unknown = unknown;
  return copy as unknown as M;
}

/**
 * `msg` ready for binary serialization without a long block, as a promise: its large lists of messages encoded in turns
 * and joined (withEncodedLists), its large lists of strings encoded in slices (stringsInTurns) and put back as one
 * unknown field each; undefined — no promise — when it has no large list.
 */
export function binaryInTurns<M extends Message>(desc: DescMessage, msg: M): Promise<M> | undefined {
  const strings = largeStringLists(desc, msg);
  const ready = prepareLargeLists(desc, msg, binaryElement);
  if (ready === undefined && strings === undefined) return undefined;
  return (async () => {
    if (ready) await ready;
    const joined = withEncodedLists(desc, msg);
    if (strings === undefined) return joined;
    const copy = { ...joined } as Record<string, unknown>;
    const unknown = [...(joined.$unknown ?? [])];
    for (const f of strings) {
      unknown.push({ no: f.number, wireType: WireType.LengthDelimited, data: await stringsInTurns(f.number, (msg as unknown as Record<string, string[]>)[f.localName]) });
      copy[f.localName] = [];
    }
    copy.$unknown = unknown;
    return copy as unknown as M;
  })();
}

/** `msg` ready for binary serialization without a long block (binaryInTurns; `msg` itself when it has no large list). */
export async function binaryReady(desc: DescMessage, msg: Message): Promise<Message> {
  return (await binaryInTurns(desc, msg)) ?? msg;
}

/** Strings of a list protobuf-encoded by one BinaryWriter in stringsInTurns: ~1 ms apiece. */
const BINARY_SLICE = 4096;

/**
 * A list of strings as field `no` holds it on the wire — each element's tag, length and UTF-8 bytes, one after the
 * other — without the first element's tag: the data of one unknown field that `toBinary` writes after that tag, giving
 * the bytes it writes for the list itself. Written in slices of BINARY_SLICE, a turn of the event loop between.
 */
async function stringsInTurns(no: number, values: readonly string[]): Promise<Uint8Array> {
  const turns = turnTaker();
  const parts: Uint8Array[] = [];
  for (let i = 0; i < values.length; i += BINARY_SLICE) {
    const writer = new BinaryWriter();
    for (let j = i; j < Math.min(values.length, i + BINARY_SLICE); j++) writer.tag(no, WireType.LengthDelimited).string(values[j]);
    parts.push(writer.finish());
    await turns.maybe();
  }
  return joined(parts).subarray(new BinaryWriter().tag(no, WireType.LengthDelimited).finish().byteLength);
}

// gRPC, gRPC-Web (also its text form, base64 of the binary) and Connect with protobuf; and their JSON variants.
const BINARY_CONTENT_TYPE = /^application\/(?:proto|connect\+proto|grpc(?:-web(?:-text)?)?(?:\+proto)?)\s*(?:;|$)/i;
const JSON_CONTENT_TYPE = /^application\/(?:(?:connect|grpc|grpc-web)\+)?json\s*(?:;|$)/i;

/** How a call's answer is serialized: from its content type, or for a Connect `GET` (which has none) its `encoding`. */
function codecOf(req: { header: Headers; requestMethod: string; url: string }): "binary" | "json" | undefined {
  const type = req.header.get("content-type");
  if (type === null && req.requestMethod === "GET") {
    const encoding = new URL(req.url, "http://connect").searchParams.get("encoding");
    return encoding === "proto" ? "binary" : encoding === "json" ? "json" : undefined;
  }
  return type === null ? undefined : BINARY_CONTENT_TYPE.test(type) ? "binary" : JSON_CONTENT_TYPE.test(type) ? "json" : undefined;
}

/**
 * What a listener's Connect-ES handlers (gRPC, gRPC-Web, Connect streams and the Connect calls the plain unary path
 * leaves to them) need so that an answer with a large list is serialized in turns and joined: an interceptor, and the
 * JSON options to serialize with — `options` and a text encoder that goes with the interceptor.
 *
 * Protobuf answers get their lists as unknown fields (see withEncodedLists). JSON has no such room: Connect-ES makes a
 * JSON answer's text whole (`toJsonString`, ~4 µs per instance, 33–45 ms in one piece for the first message of a watch
 * of 8,000 instances) and then encodes it with the options' `textEncoder`. So the interceptor hands Connect-ES a
 * stand-in of the message whose large lists read as empty, and the text encoder appends the lists' joined texts to the
 * stand-in's text. The two meet through `pendingTail`: Connect-ES reads the stand-in's lists only while it serializes
 * it, synchronously, right before it encodes that text, so the tail a stand-in sets is the one the next encode takes
 * (a microtask clears it if no encode follows, say when serialization failed). A test of every protocol checks that
 * the lists arrive whole (registry's large-answers.test.ts): a Connect-ES that serialized otherwise fails it.
 */
export function largeListsSerialization<O extends Partial<JsonWriteOptions & JsonReadOptions>>(options: O): { interceptor: Interceptor; jsonOptions: O & { textEncoder: { encode(text: string): Uint8Array } } } {
  // Implicit values emitted would put an empty list in the stand-in's text beside the appended one.
  if ((options as JsonWriteOptions).alwaysEmitImplicit) throw new Error("largeListsSerialization: alwaysEmitImplicit is not supported");
  const texts = jsonTexts(options);
  const utf8 = new TextEncoder();
  let pendingTail: string | undefined;
  const clear = () => void (pendingTail = undefined);
  const textEncoder = {
    encode(text: string): Uint8Array {
      const tail = pendingTail;
      pendingTail = undefined;
      return utf8.encode(tail === undefined ? text : withTail(text, tail));
    },
  };

  /** `msg` ready for JSON serialization by Connect-ES without a long block: its large lists encoded, in a stand-in. */
  async function jsonReady(desc: DescMessage, msg: Message): Promise<Message> {
    const messages = largeLists(desc, msg);
    const strings = largeStringLists(desc, msg);
    if (messages === undefined && strings === undefined) return msg;
    let tail = "";
    if (messages) {
      await encodeInTurns(messages, msg, texts.message);
      tail = listsTail(texts.list, msg, messages);
    }
    for (const f of strings ?? []) tail += `,${JSON.stringify(f.jsonName)}:${await jsonArrayInTurns((msg as unknown as Record<string, string[]>)[f.localName])}`;
    const lists = [...(messages ?? []), ...(strings ?? [])];
    const standIn = withoutLists(msg, lists);
    const empty: never[] = [];
    for (const f of lists) {
      Object.defineProperty(standIn, f.localName, {
        enumerable: true,
        get() {
          pendingTail = tail;
          queueMicrotask(clear);
          return empty;
        },
      });
    }
    return standIn;
  }

  const interceptor: Interceptor = (next) => async (req) => {
    const res = await next(req);
    const output = req.method.output;
    // Most unary answers have no large list: they pass on one field check, before the codec is worked out (a Connect
    // `GET`'s means parsing its URL).
    if (!res.stream && !hasLargeList(output, (res as UnaryResponse).message as Message)) return res;
    const codec = codecOf(req);
    if (codec === undefined) return res; // a content type Connect-ES refuses anyway
    const ready = codec === "binary" ? binaryReady : jsonReady;
    if (!res.stream) return { ...res, message: await ready(output, (res as UnaryResponse).message as Message) } as UnaryResponse;
    const messages = (res as StreamResponse).message as AsyncIterable<Message>;
    return {
      ...res,
      message: (async function* () {
        for await (const m of messages) yield await ready(output, m);
      })(),
    } as StreamResponse;
  };
  return { interceptor, jsonOptions: { ...options, textEncoder } };
}

/** Answers smaller than this are decoded in one piece: they cannot hold enough messages to matter (< 1 ms). */
const LARGE_ANSWER_BYTES = 16 * 1024;

/**
 * `fromBinary(desc, bytes)`; an answer with a long list of messages is decoded a few milliseconds at a time (a promise):
 * a remote 8,000-instance list took 33–38 ms in one piece (175 ms the first time, before the JIT). The bytes are
 * scanned once for the lists' elements; the rest of the message is decoded at once, then the elements in turns. Lists of
 * strings too: a remote namespace's 100,000 config ids took 30–67 ms of `fromBinary` in one piece.
 */
export function fromBinaryInTurns<Desc extends DescMessage, M = MessageShape<Desc>>(desc: Desc, bytes: Uint8Array): M | Promise<M> {
  const lists = bytes.byteLength < LARGE_ANSWER_BYTES ? undefined : listsByNumber(desc);
  if (lists === undefined) return fromBinary(desc, bytes) as M;
  const reader = new BinaryReader(bytes);
  const elements = new Map<DescField, Uint8Array[]>();
  const rest: Uint8Array[] = [];
  let longest = 0;
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const [no, wireType] = reader.tag();
    const f = wireType === WireType.LengthDelimited ? lists.get(no) : undefined;
    if (f === undefined) {
      reader.skip(wireType, no);
      rest.push(bytes.subarray(start, reader.pos));
      continue;
    }
    let list = elements.get(f);
    if (!list) elements.set(f, (list = []));
    list.push(reader.bytes());
    longest = Math.max(longest, list.length);
  }
  if (longest < LARGE_LIST) return fromBinary(desc, bytes) as M;
  return (async () => {
    const msg = fromBinary(desc, joined(rest)) as M;
    const turns = turnTaker();
    const { decodeUtf8 } = getTextEncoding();
    for (const [f, list] of elements) {
      const out = (msg as unknown as Record<string, unknown[]>)[f.localName];
      // as fromBinary reads a string: reader.string(field.utf8Validation)
      const element = f.fieldKind === "list" && f.listKind === "message" ? (b: Uint8Array) => fromBinary(f.message, b) : (b: Uint8Array) => decodeUtf8(b, f.utf8Validation);
      for (let i = 0; i < list.length; i++) {
        out.push(element(list[i]));
        if ((i & 15) === 15) await turns.maybe();
      }
    }
    return msg;
  })();
}

function joined(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

const listsByNumbers = new WeakMap<DescMessage, Map<number, DescField> | null>();

/** The lists of messages and of strings of `desc` by field number (found once per message type); undefined when none. */
function listsByNumber(desc: DescMessage): Map<number, DescField> | undefined {
  let lists = listsByNumbers.get(desc);
  if (lists === undefined) {
    const fields = [...messageListFields(desc), ...stringListFields(desc)];
    listsByNumbers.set(desc, (lists = fields.length === 0 ? null : new Map(fields.map((f) => [f.number, f]))));
  }
  return lists ?? undefined;
}
