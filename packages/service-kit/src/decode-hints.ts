import type { DescMessage } from "@bufbuild/protobuf";

/**
 * What to do about a protobuf JSON decoding failure, for the messages that name only what went wrong: an unknown key
 * gets the fields the message has, a Duration or Timestamp that did not parse gets how one is written.
 */
export function decodeHint(message: string, schema: DescMessage): string {
  if (/key "[^]*" is unknown/.test(message)) {
    const names = schema.fields.map((f) => f.jsonName);
    return `${message}: ${schema.name} has ${names.length > 20 ? `${names.slice(0, 20).join(", ")}, …` : names.join(", ")}`;
  }
  if (message.includes("google.protobuf.Duration")) {
    // written right, but beyond what a Duration holds: telling how to write one would not help
    if (/from JSON: "-?\d+(\.\d+)?s"$/.test(message)) return `${message}: too long for a duration, which holds at most 315576000000s (10,000 years)`;
    return `${message}: write a duration as seconds with an "s", e.g. "30s" or "1.5s"`;
  }
  if (message.includes("google.protobuf.Timestamp")) return `${message}: write a time in RFC 3339, e.g. "2026-11-23T10:00:00Z"`;
  return message;
}
