/**
 * Config id rules. A config id becomes a ZIP entry name on export and comes back from that name on import, so the
 * ids SetConfig accepts are exactly the names the import restores unchanged: every rule here refuses an id that
 * some ZIP tool (or our own import) would drop, rename, treat as a folder or as a path outside the archive.
 */

export const MAX_CONFIG_ID_CHARS = 512;

/** A "." or ".." path segment anywhere in the id. */
const DOT_SEGMENT = /(?:^|\/)\.\.?(?:\/|$)/;
/** C0 controls and DEL: invisible, and some of them (NUL, CR, LF) end names in tools and logs. */
const CONTROL = /[\u0000-\u001f\u007f]/;
/** An unpaired UTF-16 surrogate has no UTF-8 form: the archive (and protobuf) would carry U+FFFD instead. */
const LONE_SURROGATE = /\p{Cs}/u;
/** A segment that starts with "." is a hidden file; __MACOSX/ holds macOS resource forks. Archivers add both. */
const HIDDEN_SEGMENT = /(?:^|\/)\./;
const MACOS_METADATA = /^__MACOSX(?:\/|$)/;

/**
 * Rules every operation applies, reads included. They have held since the first release, so every stored id passes
 * them; `export` is reserved because `GET …/configs/export` is the archive.
 */
export function basicConfigIdProblem(id: string): string | undefined {
  if (!id) return "config id is required, e.g. app.yaml";
  // characters as people count them (code points): an emoji is one, not the two UTF-16 units of `length` (counted only
  // past the limit in units, which code points never exceed)
  if (id.length > MAX_CONFIG_ID_CHARS) {
    const chars = [...id].length;
    if (chars > MAX_CONFIG_ID_CHARS) return `config id is ${chars} characters long, over the limit of ${MAX_CONFIG_ID_CHARS}`;
  }
  if (CONTROL.test(id)) return "config id must not contain control characters (U+0000–U+001F, U+007F)";
  if (id === "export") return '"export" is reserved (GET .../configs/export downloads the archive): choose another config id';
  if (id.startsWith("/") || DOT_SEGMENT.test(id)) {
    return `config id "${id}" must not start with "/" or contain "." or ".." segments: it names a ZIP entry on export, which must stay inside the archive`;
  }
  return undefined;
}

// Module level, not a closure per call: SetConfig checks every id it writes (the PUT hot path).
const invalid = (id: string, why: string): ConfigIdProblem => ({ hidden: false, message: `config id "${id}" ${why}` });

/** Why an id cannot be written; `hidden`: the import skips (rather than rejects) an entry of that name. */
export interface ConfigIdProblem {
  hidden: boolean;
  message: string;
}

/**
 * Rules for writing a config (SetConfig and import): the basic ones, plus those that make the export → import round
 * trip exact. Ids stored before these rules existed can still be read, rolled back and deleted.
 */
export function writableConfigIdProblem(id: string): ConfigIdProblem | undefined {
  const basic = basicConfigIdProblem(id);
  if (basic) return { hidden: false, message: basic };
  if (LONE_SURROGATE.test(id)) return { hidden: false, message: "config id is not valid Unicode (it holds an unpaired UTF-16 surrogate), so it has no UTF-8 form" };
  if (id.includes("\\")) return invalid(id, 'must not contain "\\": ZIP tools read it as a folder separator, so the id would not come back from an export');
  if (id.endsWith("/")) return invalid(id, 'must not end with "/": in a ZIP archive that names a folder, not a file');
  if (id.includes("//")) return invalid(id, 'must not contain an empty segment ("//"): unpackers collapse it, so the id would not come back from an export');
  if (/^[A-Za-z]:\//.test(id)) return invalid(id, "must not start with a drive letter and \"/\" (C:/…): in a ZIP archive that is an absolute Windows path");
  if (HIDDEN_SEGMENT.test(id) || MACOS_METADATA.test(id)) {
    return {
      hidden: true,
      message: `config id "${id}" must not have a segment starting with "." or start with "__MACOSX/": those are hidden files and macOS metadata, which the import skips, so the id would not come back from an export`,
    };
  }
  return undefined;
}
