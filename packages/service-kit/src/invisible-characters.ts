/**
 * Characters with which one name can show as another in the user list, the audit log and error messages: controls
 * (C0 and C1: U+009B is an 8-bit CSI), format characters (zero-width space and joiners, soft hyphen, word joiner,
 * bidirectional controls, tag characters), line and paragraph separators, and the rest of Unicode's default-ignorable
 * code points (Hangul fillers, variation selectors, the combining grapheme joiner) — all of them draw nothing, or
 * rearrange what is drawn, so "root" followed by one of them reads "root".
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/u;
const INVISIBLE_ALL = new RegExp(INVISIBLE.source, "gu");

/** The first character of `value` that would not show, as `U+200B`; undefined when every one shows. */
export function invisibleCharacterIn(value: string): string | undefined {
  const c = INVISIBLE.exec(value)?.[0];
  return c === undefined ? undefined : `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
}

/** `value` with every character that would not show written out (`\u200b`, `\u{e0041}`), for a record anyone can write. */
export function withInvisibleWrittenOut(value: string): string {
  return value.replace(INVISIBLE_ALL, (c) => {
    const code = c.codePointAt(0)!;
    return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}
