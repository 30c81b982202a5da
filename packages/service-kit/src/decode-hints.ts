import type { DescMessage } from "@bufbuild/protobuf";

/** The fields of `schema` as JSON names them, the first 20. */
function fieldsOf(schema: DescMessage): string {
  const names = schema.fields.map((f) => f.jsonName);
  return names.length > 20 ? `${names.slice(0, 20).join(", ")}, …` : names.join(", ");
}

/** The message type named `typeName` among `schema` and the messages its fields hold, at any depth. */
function messageNamed(schema: DescMessage, typeName: string, seen = new Set<DescMessage>()): DescMessage | undefined {
  if (schema.typeName === typeName) return schema;
  seen.add(schema);
  for (const f of schema.fields) {
    const inner = f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message") || (f.fieldKind === "map" && f.mapKind === "message") ? f.message : undefined;
    const found = inner && !seen.has(inner) ? messageNamed(inner, typeName, seen) : undefined;
    if (found) return found;
  }
  return undefined;
}

/**
 * What to do about a protobuf JSON decoding failure, for the messages that name only what went wrong: an unknown key
 * gets the fields of the message it was found in (the request's, or one nested in it), a message given as something
 * other than an object says to send one, a Duration or Timestamp that did not parse gets how one is written.
 */
export function decodeHint(message: string, schema: DescMessage): string {
  const unknownIn = /^cannot decode message (\S+) from JSON: key "[^]*" is unknown/.exec(message);
  if (unknownIn || /key "[^]*" is unknown/.test(message)) {
    const where = (unknownIn && messageNamed(schema, unknownIn[1])) || schema;
    return where.fields.length === 0 ? `${message}: ${where.name} takes no fields: send {}` : `${message}: ${where.name} has ${fieldsOf(where)}`;
  }
  // `[]`, `null`, a string or a number where a message (the request, or one of its fields) was expected
  // (not a well-known type's: a Duration, a Timestamp, a Value are written otherwise, below)
  const notAnObject = /^cannot decode message (\S+) from JSON: (?:Array\(\d+\)|null|true|false|-?[\d.eE+-]+|".*")$/.exec(message);
  if (notAnObject && !notAnObject[1].startsWith("google.protobuf.")) {
    const what = messageNamed(schema, notAnObject[1]);
    return `${message}: send a JSON object${what ? ` with ${what.name}'s fields (${fieldsOf(what)})` : ""}`;
  }
  // protobuf-es writes a Duration's or a Timestamp's fraction with "0".repeat(9 - digits): more than 9 digits throw
  // this RangeError, which names neither
  if (/^Invalid count value: -\d+$/.test(message)) {
    return `a duration or a time has more than 9 digits after its decimal point (nanoseconds are the finest): write at most 9, e.g. "1.5s"`;
  }
  if (message.includes("google.protobuf.Duration")) {
    // written right, but beyond what a Duration holds: telling how to write one would not help
    if (/from JSON: "-?\d+(\.\d+)?s"$/.test(message)) return `${message}: too long for a duration, which holds at most 315576000000s (10,000 years)`;
    return `${message}: write a duration as seconds with an "s", e.g. "30s" or "1.5s"`;
  }
  if (message.includes("google.protobuf.Timestamp")) return `${message}: write a time in RFC 3339, e.g. "2026-11-23T10:00:00Z"`;
  return message;
}
