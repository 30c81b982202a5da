import { InvalidIdError } from "../errors.js";
import type { IdConverter } from "./converter.js";

/** `prefix + inner(id)`; parsing requires the prefix. Use for readable, typed ids such as `ord_…`. */
export function prefixConverter(prefix: string, actual: IdConverter): IdConverter {
  return {
    kind: "PrefixIdConverter",
    asString: (id) => prefix + actual.asString(id),
    asId(value) {
      if (!value.startsWith(prefix)) throw new InvalidIdError(`"${value}" does not start with "${prefix}"`);
      return actual.asId(value.slice(prefix.length));
    },
    describe: () => ({ kind: "PrefixIdConverter", prefix, actual: actual.describe() }),
  };
}

/** `inner(id) + suffix`; parsing requires the suffix. */
export function suffixConverter(suffix: string, actual: IdConverter): IdConverter {
  return {
    kind: "SuffixIdConverter",
    asString: (id) => actual.asString(id) + suffix,
    asId(value) {
      if (!value.endsWith(suffix)) throw new InvalidIdError(`"${value}" does not end with "${suffix}"`);
      return actual.asId(value.slice(0, value.length - suffix.length));
    },
    describe: () => ({ kind: "SuffixIdConverter", suffix, actual: actual.describe() }),
  };
}
