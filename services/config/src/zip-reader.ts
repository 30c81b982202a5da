import { Code, ConnectError } from "@connectrpc/connect";
import { LIMIT_METADATA } from "@gov/service-kit";
import { promisify } from "node:util";
import { crc32, inflateRaw } from "node:zlib";
import * as yauzl from "yauzl";

/**
 * Reads an uploaded ZIP archive the safe way round: yauzl parses the end record and the central directory (nothing
 * is inflated for that), every limit is checked against what the directory declares, the entries' byte ranges are
 * checked for overlaps, and only then is an entry inflated — by zlib on the thread pool, with an output cap equal
 * to its declared size, so an entry that lies about its size is stopped after at most one chunk past it.
 */

const inflateRawAsync = promisify(inflateRaw);

const CENTRAL_DIRECTORY_SIGNATURE = 0x02014b50;
const FLAG_ENCRYPTED = 0x0001;
const FLAG_UTF8 = 0x0800;
const INFO_ZIP_UNICODE_PATH = 0x7075;

export interface ArchiveLimits {
  maxZipEntries: number;
  maxZipUncompressedBytes: number;
}

/** One central-directory record, with its name decoded (or the reason it cannot be) and its data located. */
export interface ZipEntryInfo {
  /** 1-based position in the central directory, as messages name it ("entry #3"). */
  index: number;
  /** The decoded name; when it cannot be decoded, a lossy rendering for the result row. */
  name: string;
  /** Set when the name's bytes are not UTF-8: the entry cannot be imported. */
  nameProblem?: string;
  encrypted: boolean;
  compressionMethod: number;
  crc32: number;
  compressedSize: number;
  uncompressedSize: number;
  localHeaderOffset: number;
  /** Where the entry's (compressed) data starts in the archive. */
  dataStart: number;
}

const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const utf8Lossy = new TextDecoder("utf-8", { ignoreBOM: true });

/** Archive-level refusals: the client's archive, so invalid_argument; nothing is imported from it. */
export const unreadable = (why: string) => new ConnectError(`the uploaded file is not a readable ZIP archive (${why}); nothing was imported`, Code.InvalidArgument);
const corrupt = (entry: ZipEntryInfo, why: string) =>
  new ConnectError(`entry #${entry.index} ("${shortName(entry.name)}") ${why}: the archive is damaged or crafted; nothing was imported`, Code.InvalidArgument);
/** A count or size limit of the archive: resource_exhausted (413 on REST), naming the limit and its setting. */
const overLimit = (message: string, setting: string) => new ConnectError(message, Code.ResourceExhausted, { [LIMIT_METADATA]: setting });

export const canceled = () => new ConnectError("the client went away: the import stopped", Code.Canceled);

/** Names are echoed in messages and rows; a name can be 64 KiB, so long ones are cut. */
export function shortName(name: string, max = 512): string {
  return name.length > max ? `${name.slice(0, max)}…` : name;
}

function hex(bytes: Uint8Array, max = 32): string {
  const shown = Buffer.from(bytes.subarray(0, max)).toString("hex").replace(/(..)(?!$)/g, "$1 ");
  return bytes.length > max ? `${shown} …` : shown;
}

/**
 * UTF-8 when flagged (general purpose bit 11), else the Info-ZIP Unicode Path field when it matches the name, else
 * the bytes themselves when they are valid UTF-8 (ASCII, and tools that write UTF-8 without the flag). Anything else is
 * a legacy code page (CP437, Shift-JIS, …) that cannot be told apart reliably, so the entry is refused, never guessed.
 */
function decodeName(raw: Buffer, flags: number, extraFields: { id: number; data: Buffer }[]): { name: string; problem?: string } {
  if (flags & FLAG_UTF8) {
    try {
      return { name: utf8Strict.decode(raw) };
    } catch {
      return { name: utf8Lossy.decode(raw), problem: `its name is marked UTF-8 but is not valid UTF-8 (bytes ${hex(raw)})` };
    }
  }
  const unicodePath = extraFields.find((f) => f.id === INFO_ZIP_UNICODE_PATH);
  // Version 1, then the CRC-32 of the header's name: a field written for another name (renamed entry) is stale.
  if (unicodePath && unicodePath.data.length >= 5 && unicodePath.data[0] === 1 && unicodePath.data.readUInt32LE(1) === crc32(raw)) {
    try {
      return { name: utf8Strict.decode(unicodePath.data.subarray(5)) };
    } catch {
      // fall through to the name itself
    }
  }
  try {
    return { name: utf8Strict.decode(raw) };
  } catch {
    return {
      name: utf8Lossy.decode(raw),
      problem: `its name is not UTF-8 (bytes ${hex(raw)}; a legacy code page such as CP437?): re-create the archive with UTF-8 names`,
    };
  }
}

function describe(err: unknown): string {
  return shortName(err instanceof Error ? err.message : String(err), 200);
}

/**
 * The archive's entries, every limit checked and every byte range validated, without inflating anything. Throws
 * resource_exhausted for a limit (naming its setting), invalid_argument for an unreadable or crafted archive, and
 * canceled when `signal` aborts. Yields to the event loop between records (yauzl reads each one in its own tick).
 */
export async function readCentralDirectory(bytes: Buffer, limits: ArchiveLimits, signal: AbortSignal): Promise<ZipEntryInfo[]> {
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.fromBufferPromise(bytes, { decodeStrings: false, validateEntrySizes: true, strictFileNames: false });
  } catch (err) {
    throw unreadable(describe(err));
  }
  try {
    // The end record's count, before a single record is read: a directory flood is refused here.
    if (zip.entryCount > limits.maxZipEntries) {
      throw overLimit(
        `the archive has ${zip.entryCount} entries (folders included), over the limit of ${limits.maxZipEntries} entries (gov.limits.zip-entries); nothing was imported`,
        "gov.limits.zip-entries",
      );
    }
    const centralDirectoryStart = (zip as unknown as { readEntryCursor: number }).readEntryCursor;
    const entries: ZipEntryInfo[] = [];
    let declaredTotal = 0;
    try {
      for await (const entry of zip.eachEntry()) {
        if (signal.aborted) throw canceled();
        declaredTotal += entry.uncompressedSize;
        if (declaredTotal > limits.maxZipUncompressedBytes) {
          throw overLimit(
            `the archive's entries declare more than ${limits.maxZipUncompressedBytes} bytes uncompressed in all, over the limit of ` +
              `${limits.maxZipUncompressedBytes} bytes (gov.limits.zip-uncompressed); nothing was imported`,
            "gov.limits.zip-uncompressed",
          );
        }
        const { name, problem } = decodeName(entry.fileNameRaw, entry.generalPurposeBitFlag, entry.extraFields);
        const info: ZipEntryInfo = {
          index: entries.length + 1,
          name,
          nameProblem: problem,
          encrypted: (entry.generalPurposeBitFlag & FLAG_ENCRYPTED) !== 0,
          compressionMethod: entry.compressionMethod,
          crc32: entry.crc32,
          compressedSize: entry.compressedSize,
          uncompressedSize: entry.uncompressedSize,
          localHeaderOffset: entry.relativeOffsetOfLocalHeader,
          dataStart: -1,
        };
        try {
          // Checks the local header's signature and that the data ends inside the archive.
          info.dataStart = (await zip.readLocalFileHeaderPromise(entry, { minimal: true })).fileDataStart;
        } catch (err) {
          throw corrupt(info, `has no valid local header (${describe(err)})`);
        }
        entries.push(info);
      }
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      throw unreadable(describe(err));
    }
    // An end record that declares fewer entries than the directory holds would hide the rest from the results.
    const cursor = (zip as unknown as { readEntryCursor: number }).readEntryCursor;
    if (cursor + 4 <= bytes.length && bytes.readUInt32LE(cursor) === CENTRAL_DIRECTORY_SIGNATURE) {
      throw unreadable(`its central directory holds more entries than the ${zip.entryCount} its end record declares`);
    }
    checkNoOverlap(entries, centralDirectoryStart);
    return entries;
  } finally {
    zip.close();
  }
}

/**
 * Each entry's header and data must occupy bytes of their own, before the central directory. Entries that share data
 * are the overlapping-entries zip bomb: a few kilobytes that inflate to gigabytes, entry after entry.
 */
function checkNoOverlap(entries: ZipEntryInfo[], centralDirectoryStart: number): void {
  const byOffset = [...entries].sort((a, b) => a.localHeaderOffset - b.localHeaderOffset);
  for (let i = 0; i < byOffset.length; i++) {
    const entry = byOffset[i];
    const end = entry.dataStart + entry.compressedSize;
    if (end > centralDirectoryStart) throw corrupt(entry, "has data that runs into the central directory");
    const next = byOffset[i + 1];
    if (next && next.localHeaderOffset < end) {
      throw corrupt(next, `overlaps entry #${entry.index} ("${shortName(entry.name)}") in the archive (overlapping entries are a zip-bomb technique)`);
    }
  }
}

/**
 * The entry's bytes, inflated with a hard cap of its declared size (already checked against the limits), then checked
 * against its declared size and CRC-32. Only stored (0) and deflated (8) entries get here.
 */
export async function inflateEntry(bytes: Buffer, entry: ZipEntryInfo): Promise<Buffer> {
  const data = bytes.subarray(entry.dataStart, entry.dataStart + entry.compressedSize);
  let out: Buffer;
  if (entry.compressionMethod === 0) {
    out = data;
  } else {
    try {
      // maxOutputLength makes zlib stop (and free its state) as soon as the output passes the cap.
      out = await inflateRawAsync(data, { maxOutputLength: Math.max(1, entry.uncompressedSize) });
    } catch (err) {
      if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") {
        throw corrupt(entry, `inflates to more than the ${entry.uncompressedSize} bytes it declares (a zip-bomb technique)`);
      }
      throw corrupt(entry, `has damaged compressed data (${describe(err)})`);
    }
  }
  if (out.length !== entry.uncompressedSize) throw corrupt(entry, `inflates to ${out.length} bytes, not the ${entry.uncompressedSize} it declares`);
  if (crc32(out) !== entry.crc32) throw corrupt(entry, "fails its CRC-32 check");
  return out;
}
