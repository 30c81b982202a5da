/** What `describe()` of a converter returns: its kind plus its own settings (nested under `actual` for wrappers). */
export interface ConverterDescription {
  kind: string;
  [key: string]: unknown;
}

/** Turns ids into strings and back. Ids may be `bigint` (64-bit layouts) or `number` (≤ 53-bit layouts, segments). */
export interface IdConverter {
  readonly kind: string;
  asString(id: bigint | number): string;
  /** Parses a string made by `asString`; throws `InvalidIdError` on anything else. */
  asId(value: string): bigint;
  describe(): ConverterDescription;
}
