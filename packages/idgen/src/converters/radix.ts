import { InvalidIdError, InvalidSettingError } from "../errors.js";
import type { ConverterDescription, IdConverter } from "./converter.js";

const DIGITS_62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const MAX_63 = 2n ** 63n - 1n;

export interface RadixOptions {
  /** Output width; ids needing more characters throw. Default: enough for any 63-bit id (11 for 62, 13 for 36). */
  charSize?: number;
  /** Left-pad with `0` to `charSize`, so strings sort like the ids (byte order). Default true. */
  padStart?: boolean;
}

function encode(id: bigint | number, radix: number, digits: string): string {
  if (typeof id === "number") {
    if (!Number.isSafeInteger(id) || id < 0) throw new InvalidIdError(`id ${id} is not a non-negative safe integer`);
    if (id === 0) return "0";
    let out = "";
    while (id > 0) {
      out = digits[id % radix] + out;
      id = Math.floor(id / radix);
    }
    return out;
  }
  if (id < 0n) throw new InvalidIdError(`id ${id} is negative`);
  if (id <= BigInt(Number.MAX_SAFE_INTEGER)) return encode(Number(id), radix, digits);
  const r = BigInt(radix);
  let out = "";
  while (id > 0n) {
    out = digits[Number(id % r)] + out;
    id /= r;
  }
  return out;
}

function createRadixConverter(kind: string, radix: number, options: RadixOptions): IdConverter {
  const digits = DIGITS_62.slice(0, radix);
  const fullSize = encode(MAX_63, radix, digits).length;
  const charSize = options.charSize ?? fullSize;
  const padStart = options.padStart ?? true;
  if (!Number.isInteger(charSize) || charSize < 1 || charSize > fullSize) {
    throw new InvalidSettingError(`${kind}.charSize`, `must be 1..${fullSize}, got ${charSize}`);
  }
  const maxId = charSize === fullSize ? MAX_63 : BigInt(radix) ** BigInt(charSize) - 1n;
  const maxIdAsNumber = Number(maxId); // numbers compare without a BigInt per id (this is on the hot path)
  const lookup = new Map([...digits].map((c, i) => [c, BigInt(i)]));
  return {
    kind,
    asString(id) {
      // what asId would refuse is not written: every string this writes reads back
      if (typeof id === "bigint" ? id > maxId : id > maxIdAsNumber) throw new InvalidIdError(`id ${id} is above ${maxId}, the largest ${kind} id of ${charSize} characters`);
      const s = encode(id, radix, digits);
      if (s.length > charSize) throw new InvalidIdError(`id ${id} needs more than ${charSize} ${kind} characters`);
      return padStart ? s.padStart(charSize, "0") : s;
    },
    asId(value) {
      if (value.length === 0 || value.length > charSize) throw new InvalidIdError(`"${value}" is not a ${kind} id of at most ${charSize} characters`);
      let id = 0n;
      const r = BigInt(radix);
      for (const c of value) {
        const d = lookup.get(c);
        if (d === undefined) throw new InvalidIdError(`"${value}" has a character outside the ${kind} alphabet`);
        id = id * r + d;
      }
      if (id > maxId) throw new InvalidIdError(`"${value}" is above ${maxId}`);
      return id;
    },
    describe: (): ConverterDescription => ({ kind, radix, charSize, padStart, maxId: maxId.toString() }),
  };
}

/** Radix-62 (`0-9A-Za-z`); the default converter. Padded output sorts in byte order, not case-insensitively. */
export function radix62Converter(options: RadixOptions = {}): IdConverter {
  return createRadixConverter("Radix62IdConverter", 62, options);
}

/** Radix-36 (`0-9A-Z`); case-insensitive friendly. */
export function radix36Converter(options: RadixOptions = {}): IdConverter {
  return createRadixConverter("Radix36IdConverter", 36, options);
}

/** Encodes a non-negative safe integer in radix 62, left-padded to `width` (used by the composite generator). */
export function radix62Fixed(value: number, width: number): string {
  return encode(value, 62, DIGITS_62).padStart(width, "0");
}
