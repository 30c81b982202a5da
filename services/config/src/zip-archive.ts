import { Code, ConnectError } from "@connectrpc/connect";
import { Readable } from "node:stream";
import JSZip from "jszip";
import type { ConfigLimits } from "./settings.js";

/** One entry of an import archive: a config to write, or a reason it is passed over. */
export type ImportEntry =
  | { configId: string; data: string }
  | { configId: string; outcome: "skipped" | "rejected"; reason: string };

// ZIP entries carry a DOS date; a fixed one makes the same configs always export to the same bytes.
const FIXED_DATE = new Date(Date.UTC(1980, 0, 1));
const utf8 = new TextDecoder("utf-8", { fatal: true });

function entryProblem(name: string): { outcome: "skipped" | "rejected"; reason: string } | undefined {
  if (name.startsWith("/") || /^[A-Za-z]:[\\/]/.test(name) || name.includes("\\")) {
    return { outcome: "rejected", reason: "absolute paths and backslashes are not allowed in entry names" };
  }
  const parts = name.split("/");
  if (parts.some((p) => p === ".." || p === ".")) return { outcome: "rejected", reason: "entry names must not contain '.' or '..' segments" };
  if (parts.some((p) => p.startsWith(".")) || parts[0] === "__MACOSX") return { outcome: "skipped", reason: "hidden file" };
  return undefined;
}

/** Declared size first (cheap, refuses obvious bombs), then the real size while inflating (declared sizes can lie). */
async function inflate(file: JSZip.JSZipObject, budget: { left: number }, limitText: string): Promise<Uint8Array> {
  const declared = (file as unknown as { _data?: { uncompressedSize?: number } })._data?.uncompressedSize ?? 0;
  if (declared > budget.left) throw new ConnectError(limitText, Code.InvalidArgument);
  const chunks: Uint8Array[] = [];
  let size = 0;
  await new Promise<void>((resolve, reject) => {
    const stream = file.nodeStream("nodebuffer");
    stream.on("data", (chunk: Uint8Array) => {
      size += chunk.length;
      if (size > budget.left) {
        stream.pause();
        reject(new ConnectError(limitText, Code.InvalidArgument));
      } else chunks.push(chunk);
    });
    stream.on("error", (err: Error) => reject(new ConnectError(`entry "${file.name}" cannot be read: ${err.message}`, Code.InvalidArgument)));
    stream.on("end", () => resolve());
  });
  budget.left -= size;
  return Buffer.concat(chunks);
}

/**
 * Reads and checks a whole import archive before anything is written: a non-ZIP upload or an archive over a
 * limit throws invalid_argument naming the limit; unsafe or hidden entries come back as rejected/skipped.
 */
export async function readImportArchive(bytes: Uint8Array, limits: ConfigLimits): Promise<ImportEntry[]> {
  if (bytes.length === 0) throw new ConnectError("the importZip file is empty: upload a ZIP archive", Code.InvalidArgument);
  if (bytes.length > limits.maxZipBytes) {
    throw new ConnectError(`the archive is ${bytes.length} bytes, over the upload limit of ${limits.maxZipBytes} bytes (gov.limits.zip-upload)`, Code.InvalidArgument);
  }
  let zip: JSZip;
  try {
    zip = await JSZip.loadAsync(bytes, { checkCRC32: true });
  } catch (err) {
    throw new ConnectError(`the uploaded file is not a readable ZIP archive (${(err as Error).message})`, Code.InvalidArgument);
  }
  const files = Object.values(zip.files).filter((f) => !f.dir);
  if (files.length > limits.maxZipEntries) {
    throw new ConnectError(`the archive has ${files.length} entries, over the limit of ${limits.maxZipEntries} (gov.limits.zip-entries); nothing was imported`, Code.InvalidArgument);
  }
  const budget = { left: limits.maxZipUncompressedBytes };
  const limitText = `the archive inflates to more than ${limits.maxZipUncompressedBytes} bytes (gov.limits.zip-uncompressed); nothing was imported`;
  const entries: ImportEntry[] = [];
  for (const file of files) {
    // JSZip quietly resolves "../x" to "x"; judge (and report) the name as it stands in the archive.
    const name = (file as unknown as { unsafeOriginalName?: string }).unsafeOriginalName ?? file.name;
    const problem = entryProblem(name);
    if (problem) {
      entries.push({ configId: name, ...problem });
      continue;
    }
    const raw = await inflate(file, budget, limitText);
    if (raw.length > limits.maxContentBytes) {
      entries.push({ configId: file.name, outcome: "rejected", reason: `content is ${raw.length} bytes, over the limit of ${limits.maxContentBytes} (gov.limits.config-content)` });
      continue;
    }
    try {
      entries.push({ configId: file.name, data: utf8.decode(raw) });
    } catch {
      entries.push({ configId: file.name, outcome: "rejected", reason: "content is not UTF-8 text" });
    }
  }
  return entries;
}

/** The export archive, one entry per config (name = configId, content = data), as a stream of chunks. */
export async function* writeExportArchive(configs: { configId: string; data: string }[]): AsyncGenerator<Uint8Array> {
  const zip = new JSZip();
  for (const c of configs) zip.file(c.configId, c.data, { date: FIXED_DATE, createFolders: false });
  const stream = zip.generateNodeStream({ type: "nodebuffer", streamFiles: true, compression: "DEFLATE", compressionOptions: { level: 6 } });
  // JSZip hands back an old-style stream; wrap it to get async iteration with back-pressure.
  for await (const chunk of new Readable().wrap(stream)) yield chunk as Buffer;
}
