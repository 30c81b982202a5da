/**
 * A small ZIP writer for tests: it writes exactly the bytes it is told, so tests can build what real tools refuse to
 * (duplicate names, unflagged legacy-code-page names, sizes that lie, overlapping entries, floods of entries) fast.
 */
import { constants, crc32, deflateRawSync } from "node:zlib";

export interface RawEntry {
  /** A string is written as UTF-8; a Buffer as the exact name bytes (e.g. CP437). */
  name: string | Buffer;
  data?: string | Buffer;
  /** 0 stored, 8 deflate (default), or any other number to claim an unsupported method (data is then stored). */
  method?: number;
  /** General purpose bit 11; default: set when `name` is a non-ASCII string. */
  utf8Flag?: boolean;
  /** Extra general purpose flags (bit 0: encrypted). */
  flags?: number;
  /** The uncompressed size to declare, when it must lie. */
  declaredSize?: number;
  /** Compressed bytes to write instead of compressing `data` (bombs). */
  compressed?: Buffer;
  crc?: number;
  /** Extra field bytes (both headers). */
  extra?: Buffer;
}

interface Placed {
  name: Buffer;
  flags: number;
  method: number;
  crc: number;
  compressedSize: number;
  size: number;
  offset: number;
  extra: Buffer;
}

const isAscii = (s: string) => /^[\x00-\x7f]*$/.test(s);

function localHeader(p: Placed): Buffer {
  const h = Buffer.alloc(30);
  h.writeUInt32LE(0x04034b50, 0);
  h.writeUInt16LE(20, 4);
  h.writeUInt16LE(p.flags, 6);
  h.writeUInt16LE(p.method, 8);
  h.writeUInt16LE(0, 10);
  h.writeUInt16LE(0x21, 12); // 1980-01-01
  h.writeUInt32LE(p.crc, 14);
  h.writeUInt32LE(p.compressedSize, 18);
  h.writeUInt32LE(Math.min(p.size, 0xffffffff), 22);
  h.writeUInt16LE(p.name.length, 26);
  h.writeUInt16LE(p.extra.length, 28);
  return Buffer.concat([h, p.name, p.extra]);
}

function centralRecord(p: Placed): Buffer {
  const h = Buffer.alloc(46);
  h.writeUInt32LE(0x02014b50, 0);
  h.writeUInt16LE(20, 4);
  h.writeUInt16LE(20, 6);
  h.writeUInt16LE(p.flags, 8);
  h.writeUInt16LE(p.method, 10);
  h.writeUInt16LE(0, 12);
  h.writeUInt16LE(0x21, 14);
  h.writeUInt32LE(p.crc, 16);
  h.writeUInt32LE(p.compressedSize, 20);
  h.writeUInt32LE(Math.min(p.size, 0xffffffff), 24);
  h.writeUInt16LE(p.name.length, 28);
  h.writeUInt16LE(p.extra.length, 30);
  h.writeUInt32LE(p.offset, 42);
  return Buffer.concat([h, p.name, p.extra]);
}

/** End records; ZIP64 ones when the count does not fit 16 bits (or `zip64`). `declaredCount` may lie. */
function endRecords(count: number, cdOffset: number, cdSize: number, zip64 = count > 0xfffe): Buffer {
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  if (!zip64) {
    eocd.writeUInt16LE(count, 8);
    eocd.writeUInt16LE(count, 10);
    eocd.writeUInt32LE(cdSize, 12);
    eocd.writeUInt32LE(cdOffset, 16);
    return eocd;
  }
  const rec = Buffer.alloc(56);
  rec.writeUInt32LE(0x06064b50, 0);
  rec.writeBigUInt64LE(44n, 4);
  rec.writeUInt16LE(45, 12);
  rec.writeUInt16LE(45, 14);
  rec.writeBigUInt64LE(BigInt(count), 24);
  rec.writeBigUInt64LE(BigInt(count), 32);
  rec.writeBigUInt64LE(BigInt(cdSize), 40);
  rec.writeBigUInt64LE(BigInt(cdOffset), 48);
  const locator = Buffer.alloc(20);
  locator.writeUInt32LE(0x07064b50, 0);
  locator.writeBigUInt64LE(BigInt(cdOffset + cdSize), 8);
  locator.writeUInt32LE(1, 16);
  eocd.writeUInt16LE(0xffff, 8);
  eocd.writeUInt16LE(0xffff, 10);
  eocd.writeUInt32LE(0xffffffff, 12);
  eocd.writeUInt32LE(0xffffffff, 16);
  return Buffer.concat([rec, locator, eocd]);
}

function place(e: RawEntry, offset: number): { placed: Placed; body: Buffer } {
  const name = typeof e.name === "string" ? Buffer.from(e.name, "utf8") : e.name;
  const data = e.data === undefined ? Buffer.alloc(0) : Buffer.from(e.data);
  const method = e.method ?? 8;
  const compressed = e.compressed ?? (method === 8 ? deflateRawSync(data) : data);
  const utf8 = e.utf8Flag ?? (typeof e.name === "string" && !isAscii(e.name));
  const placed: Placed = {
    name,
    flags: (utf8 ? 0x800 : 0) | (e.flags ?? 0),
    method,
    crc: e.crc ?? crc32(data),
    compressedSize: compressed.length,
    size: e.declaredSize ?? data.length,
    offset,
    extra: e.extra ?? Buffer.alloc(0),
  };
  return { placed, body: Buffer.concat([localHeader(placed), compressed]) };
}

/** An archive with exactly these entries, in this order. `declaredCount` writes a different count in the end record. */
export function rawZip(entries: RawEntry[], opts: { declaredCount?: number } = {}): Buffer {
  const parts: Buffer[] = [];
  const placed: Placed[] = [];
  let offset = 0;
  for (const e of entries) {
    const p = place(e, offset);
    parts.push(p.body);
    placed.push(p.placed);
    offset += p.body.length;
  }
  const central = Buffer.concat(placed.map(centralRecord));
  return Buffer.concat([...parts, central, endRecords(opts.declaredCount ?? placed.length, offset, central.length)]);
}

/** `count` stored, empty entries named by `nameOf` — a flood, written without per-entry allocation churn. */
export function floodZip(count: number, nameOf: (i: number) => string): Buffer {
  const names = Array.from({ length: count }, (_, i) => Buffer.from(nameOf(i)));
  const localSize = names.reduce((n, name) => n + 30 + name.length, 0);
  const centralSize = names.reduce((n, name) => n + 46 + name.length, 0);
  const out = Buffer.alloc(localSize + centralSize);
  const emptyCrc = crc32(Buffer.alloc(0));
  let at = 0;
  const offsets: number[] = [];
  for (const name of names) {
    offsets.push(at);
    at += localHeader({ name, flags: 0, method: 0, crc: emptyCrc, compressedSize: 0, size: 0, offset: at, extra: Buffer.alloc(0) }).copy(out, at);
  }
  names.forEach((name, i) => {
    at += centralRecord({ name, flags: 0, method: 0, crc: emptyCrc, compressedSize: 0, size: 0, offset: offsets[i], extra: Buffer.alloc(0) }).copy(out, at);
  });
  return Buffer.concat([out, endRecords(count, localSize, centralSize)]);
}

/**
 * Deflate data that inflates to `bytes` zero bytes, built from one compressed MiB repeated (each piece ends on a sync
 * flush, so the pieces concatenate into one valid stream): a 1 GiB bomb is ~1 MiB and takes milliseconds to build.
 */
export function zeroBomb(bytes: number): Buffer {
  const mib = 1 << 20;
  const piece = deflateRawSync(Buffer.alloc(mib), { finishFlush: constants.Z_SYNC_FLUSH });
  const pieces = Array.from({ length: Math.ceil(bytes / mib) }, () => piece);
  return Buffer.concat([...pieces, deflateRawSync(Buffer.alloc(0))]);
}

/**
 * The overlapping-entries bomb: one local entry's data, and `count` central records (distinct names) that all point
 * at it, each declaring `declaredSize`. Every record inflates the same kilobytes again.
 */
export function overlappingZip(count: number, compressed: Buffer, declaredSize: number): Buffer {
  const first = place({ name: "e0", compressed, declaredSize, crc: 0 }, 0);
  const central = Buffer.concat(Array.from({ length: count }, (_, i) => centralRecord({ ...first.placed, name: Buffer.from(`e${i}`) })));
  return Buffer.concat([first.body, central, endRecords(count, first.body.length, central.length)]);
}

/** A multipart/form-data body with one file part and optional text fields. */
export function multipart(file: Buffer, fields: Record<string, string> = {}, partName = "importZip") {
  const boundary = "----gov" + Math.random().toString(16).slice(2);
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  }
  parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${partName}"; filename="configs.zip"\r\nContent-Type: application/zip\r\n\r\n`));
  parts.push(file, Buffer.from(`\r\n--${boundary}--\r\n`));
  return { payload: Buffer.concat(parts), headers: { "content-type": `multipart/form-data; boundary=${boundary}` } };
}
