import { InvalidIdError } from "../errors.js";
import type { IdConverter } from "./converter.js";

const MAX_63 = 2n ** 63n - 1n;

export interface ToStringOptions {
  /** Left-pad with `0` to `charSize`. Default false. */
  padStart?: boolean;
  /** Width when padding (default 19, enough for any 63-bit id). */
  charSize?: number;
}

/** Decimal strings, optionally zero-padded so they sort like the ids. */
export function toStringConverter(options: ToStringOptions = {}): IdConverter {
  const padStart = options.padStart ?? false;
  const charSize = options.charSize ?? 19;
  return {
    kind: "ToStringIdConverter",
    asString: (id) => (padStart ? id.toString().padStart(charSize, "0") : id.toString()),
    asId(value) {
      if (!/^\d+$/.test(value)) throw new InvalidIdError(`"${value}" is not a decimal id`);
      const id = BigInt(value);
      if (id > MAX_63) throw new InvalidIdError(`"${value}" is above ${MAX_63}: ids have 63 bits`);
      return id;
    },
    describe: () => ({ kind: "ToStringIdConverter", padStart, charSize }),
  };
}
