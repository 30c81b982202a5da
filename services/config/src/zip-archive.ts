import { Code, ConnectError } from "@connectrpc/connect";
import { limitExceeded, turnTaker } from "@gov/service-kit";
import { Zip, ZipDeflate } from "fflate";
import { type ConfigIdProblem, writableConfigIdProblem } from "./config-id.js";
import type { ConfigLimits } from "./settings.js";
import { canceled, inflateEntry, readCentralDirectory, shortName, type ZipEntryInfo } from "./zip-reader.js";

/** One entry of an import archive: a config to write, or the reason it is passed over. One per archive entry. */
export type ImportEntry =
  | { configId: string; data: string }
  | { configId: string; outcome: "skipped" | "rejected"; reason: string };

// ZIP entries carry a DOS date, written from local time; a fixed one (local midnight, 1 January 1980: the earliest a
// DOS date holds, in any time zone) makes the same configs always export to the same bytes.
const FIXED_DATE = new Date(1980, 0, 1);
// Content is stored exactly as sent: a BOM is content, not a marker to strip.
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

const skipped = (configId: string, reason: string): ImportEntry => ({ configId, outcome: "skipped", reason });
const rejected = (configId: string, reason: string): ImportEntry => ({ configId, outcome: "rejected", reason });

/** What to do with an entry judged by its central-directory record alone, or undefined when it is to be inflated. */
function judge(entry: ZipEntryInfo, idProblem: ConfigIdProblem | undefined, limits: ConfigLimits): ImportEntry | undefined {
  const row = shortName(entry.name);
  if (entry.nameProblem) return rejected(row, entry.nameProblem);
  if (entry.name.endsWith("/")) return skipped(row, "a folder entry: folders are not configs (each file in it has a row of its own)");
  if (idProblem?.hidden) return skipped(row, 'a hidden file or macOS metadata (a name segment starting with "." or __MACOSX/): such names are never config ids');
  if (idProblem) return rejected(row, idProblem.message);
  if (entry.encrypted) return rejected(row, "the entry is encrypted, which the import does not support: add it unencrypted");
  if (entry.compressionMethod !== 0 && entry.compressionMethod !== 8) {
    return rejected(row, `the entry uses compression method ${entry.compressionMethod}, which the import does not support: use deflate or no compression`);
  }
  if (entry.uncompressedSize > limits.maxContentBytes) {
    return rejected(row, `content is ${entry.uncompressedSize} bytes, over the limit of ${limits.maxContentBytes} bytes (gov.limits.config-content)`);
  }
  return undefined;
}

/**
 * Reads and checks a whole import archive before anything is written, one result per entry in archive order.
 * Refuses (throws) an archive that is empty, over a limit (resource_exhausted naming the setting), unreadable or
 * crafted (invalid_argument) — before inflating anything, except an entry that inflates past its declared size,
 * which is stopped there. Throws canceled when `signal` aborts.
 */
export async function readImportArchive(upload: Uint8Array, limits: ConfigLimits, signal: AbortSignal): Promise<ImportEntry[]> {
  if (upload.length === 0) {
    throw new ConnectError(
      "no archive was received (the importZip file part is missing or has no bytes): send the ZIP as the multipart file part importZip (curl -F importZip=@configs.zip), or in the importZip field on Connect/gRPC",
      Code.InvalidArgument,
    );
  }
  if (upload.length > limits.maxZipBytes) throw limitExceeded("the ZIP upload", upload.length, limits.maxZipBytes, "gov.limits.zip-upload");
  const bytes = Buffer.from(upload.buffer, upload.byteOffset, upload.length);
  const entries = await readCentralDirectory(bytes, limits, signal);

  const turns = turnTaker();
  const results: (ImportEntry | undefined)[] = [];
  // Entries with a valid config id, by id: two entries with one name make it unclear which is meant, so neither is
  // imported (rather than "the last one wins").
  const byName = new Map<string, number[]>();
  for (const [i, entry] of entries.entries()) {
    // The same id rules as SetConfig; a folder's name ends with "/", which they refuse.
    const idProblem = entry.nameProblem ? undefined : writableConfigIdProblem(entry.name);
    results.push(judge(entry, idProblem, limits));
    if (!entry.nameProblem && !idProblem) {
      const at = byName.get(entry.name);
      if (at) at.push(i);
      else byName.set(entry.name, [i]);
    }
    await turns.maybe();
  }
  for (const [name, at] of byName) {
    if (at.length < 2) continue;
    const which = at.length > 5 ? `${at.slice(0, 5).map((i) => `#${i + 1}`).join(", ")} …` : at.map((i) => `#${i + 1}`).join(", ");
    const row = rejected(name, `the archive has ${at.length} entries named "${name}" (entries ${which}): which one is meant is unclear, so none was imported`);
    for (const i of at) {
      results[i] = row;
      await turns.maybe();
    }
  }

  for (const [i, entry] of entries.entries()) {
    if (results[i]) continue;
    if (signal.aborted) throw canceled();
    const content = await inflateEntry(bytes, entry);
    try {
      results[i] = { configId: entry.name, data: utf8.decode(content) };
    } catch {
      results[i] = rejected(entry.name, "content is not UTF-8 text: configs are text");
    }
    await turns.maybe();
  }
  return results as ImportEntry[];
}

/**
 * The export archive, one entry per config (name = configId, content = what `read` gives), as a stream of chunks.
 * Names are written verbatim in UTF-8 (a name such as "a:b" stays as it is), every non-ASCII one marked UTF-8 (general
 * purpose bit 11); content is deflated; with a fixed date the same configs always give the same bytes.
 *
 * Entries are added one at a time as the archive reaches them (fflate's streaming `Zip`): each config is read then
 * (a few ahead, see {@link readAhead}), so a namespace of thousands of large configs costs the memory of a few of them,
 * and it is deflated in slices, each in an event-loop turn of its own, as is every entry. JSZip, which wrote it before,
 * set up every entry before writing the first byte, in one piece: a namespace of 10,000 configs held the event loop
 * 184 ms, 30,000 623 ms, 100,000 over a second.
 */
export async function* writeExportArchive(entries: { configId: string; read: () => Promise<string> }[]): AsyncGenerator<Uint8Array> {
  const written: Uint8Array[] = [];
  let failed: Error | undefined;
  const zip = new Zip((err, chunk) => {
    if (err) failed ??= err;
    else written.push(chunk);
  });
  for (const entry of entries) {
    const content = Buffer.from(await entry.read(), "utf8");
    const file = new ZipDeflate(entry.configId, { level: 6 });
    file.mtime = FIXED_DATE; // an entry's own attribute, not a deflate option
    zip.add(file);
    let offset = 0;
    do {
      const slice = content.subarray(offset, offset + CONTENT_SLICE);
      offset += slice.length;
      file.push(slice, offset >= content.length);
      if (failed) throw failed;
      yield* taken(written);
      await new Promise((resolve) => setImmediate(resolve));
    } while (offset < content.length);
  }
  zip.end();
  if (failed) throw failed;
  yield* taken(written);
}

/** The chunks in `queue`, emptying it. */
function* taken(queue: Uint8Array[]): Generator<Uint8Array> {
  while (queue.length > 0) yield queue.shift()!;
}

/** Most bytes of a config deflated in one event-loop turn. */
const CONTENT_SLICE = 64 * 1024;

/**
 * `read(i)` for items read in order: each call also starts the reads of the next `window - 1` items, so a store's
 * round trips overlap while at most `window` results wait in memory.
 */
export function readAhead<T>(count: number, fetch: (i: number) => Promise<T>, window = 8): (i: number) => Promise<T> {
  const pending = new Map<number, Promise<T>>();
  const start = (i: number) => {
    if (i < count && !pending.has(i)) {
      const p = fetch(i);
      p.catch(() => undefined); // observed by whoever asks for it
      pending.set(i, p);
    }
  };
  return (i) => {
    for (let j = i; j < i + window; j++) start(j);
    const p = pending.get(i)!;
    pending.delete(i);
    return p;
  };
}
