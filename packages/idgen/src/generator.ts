import type { ConverterDescription } from "./converters/converter.js";

/** What the monitor's `/actuator/idgen` shows per generator (plus the registry name). */
export interface GeneratorDescription {
  kind: string;
  converter: ConverterDescription;
  state: Record<string, unknown>;
}

/**
 * Common shape of every generator in the registry. `nextId` is absent on string-only generators (composite),
 * so a monitor can answer 4xx for a numeric id from them.
 */
export interface IdGenerator {
  readonly name: string;
  readonly kind: string;
  nextId?(): bigint | number;
  nextIdAsString(): string;
  describe(): GeneratorDescription;
  /** Ids issued so far by this generator (for an `ids generated` counter). */
  readonly generatedCount: number;
  /** Stops background work (prefetch timers). Generators without any treat it as a no-op. */
  stop?(): void;
}
