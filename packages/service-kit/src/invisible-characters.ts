/**
 * Characters with which one name can show as another in the user list, the audit log and error messages: controls
 * (C0 and C1: U+009B is an 8-bit CSI), format characters (zero-width space and joiners, soft hyphen, word joiner,
 * bidirectional controls, tag characters), line and paragraph separators, and the rest of Unicode's default-ignorable
 * code points (Hangul fillers, variation selectors, the combining grapheme joiner) — all of them draw nothing, or
 * rearrange what is drawn, so "root" followed by one of them reads "root".
 */
const INVISIBLE = "[\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}\\p{Default_Ignorable_Code_Point}]";
/**
 * Emoji that are made of several code points: a pictograph with its emoji variation selector (U+FE0F: ❤️, ✔️) or skin
 * tone, pictographs joined by U+200D (👨‍👩‍👧, 🏳️‍🌈), keycaps (1️⃣). The selector and the joiner in them are part of what
 * shows; outside such a sequence ("root" + U+FE0F) they are as invisible as any other.
 */
const EMOJI_SEQUENCE = "\\p{Extended_Pictographic}\\p{Emoji_Modifier}?\\uFE0F?(?:\\u200D\\p{Extended_Pictographic}\\p{Emoji_Modifier}?\\uFE0F?)*|[0-9#*]\\uFE0F\\u20E3";
/** Emoji sequences (group 1), skipped whole, or a character that does not show (group 2). */
const SCAN = new RegExp(`(${EMOJI_SEQUENCE})|(${INVISIBLE})`, "gu");

/** The first character of `value` that would not show, as `U+200B`; undefined when every one shows. */
export function invisibleCharacterIn(value: string): string | undefined {
  // Every write checks its namespace here; nearly all are printable ASCII, where the scan (matchAll clones its regular
  // expression on each call: ~0.4 µs of a config PUT's ~30) can find nothing.
  if (isPrintableAscii(value)) return undefined;
  for (const m of value.matchAll(SCAN)) {
    if (m[2] !== undefined) return `U+${m[2].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
  }
  return undefined;
}

/**
 * The composed Unicode form (NFC) of `value` when `value` is not in it, else undefined: "ó" is U+00F3, or "o" followed
 * by the combining U+0301 — the same on screen, two different names. For names being created, beside
 * {@link invisibleCharacterIn}; printable ASCII (nearly every name, on every registration) is composed already.
 */
export function composedFormOf(value: string): string | undefined {
  if (isPrintableAscii(value)) return undefined;
  const composed = value.normalize("NFC");
  return composed === value ? undefined : composed;
}

function isPrintableAscii(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

/** `value` with every character that would not show written out (`\u200b`, `\u{e0041}`), for a record anyone can write. */
export function withInvisibleWrittenOut(value: string): string {
  return value.replace(SCAN, (match, emoji: string | undefined) => {
    if (emoji !== undefined) return match;
    const code = match.codePointAt(0)!;
    return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}
