import { GeneratorNotFoundError } from "./errors.js";
import type { GeneratorDescription, IdGenerator } from "./generator.js";

/** The name of the shared default generator. */
export const SHARE = "__share__";

/** One entry of the monitor's `/actuator/idgen` list. */
export interface NamedGeneratorDescription extends GeneratorDescription {
  name: string;
}

/** Named generators of a process; `share` is the default one. The monitor lists and removes through this. */
export class IdGeneratorRegistry {
  private readonly generators = new Map<string, IdGenerator>();

  /** Registers under `name` (replacing and stopping any previous one). */
  set(name: string, generator: IdGenerator): void {
    const previous = this.generators.get(name);
    if (previous && previous !== generator) previous.stop?.();
    this.generators.set(name, generator);
  }

  /** Registers only if the name is free; returns whether it did (first registration of `share` wins). */
  setIfAbsent(name: string, generator: IdGenerator): boolean {
    if (this.generators.has(name)) return false;
    this.generators.set(name, generator);
    return true;
  }

  get(name: string): IdGenerator {
    const g = this.generators.get(name);
    if (!g) throw new GeneratorNotFoundError(name);
    return g;
  }

  find(name: string): IdGenerator | undefined {
    return this.generators.get(name);
  }

  get share(): IdGenerator {
    return this.get(SHARE);
  }

  names(): string[] {
    return [...this.generators.keys()];
  }

  describe(name: string): NamedGeneratorDescription {
    return { name, ...this.get(name).describe() };
  }

  list(): NamedGeneratorDescription[] {
    return this.names().map((n) => this.describe(n));
  }

  /** Unregisters and stops the generator's background work; returns its last description. */
  remove(name: string): NamedGeneratorDescription {
    const d = this.describe(name);
    const g = this.get(name);
    this.generators.delete(name);
    // a generator registered under several names (share + its own) keeps running while still listed
    if (![...this.generators.values()].includes(g)) g.stop?.();
    return d;
  }

  /** Stops every generator's background work. */
  stopAll(): void {
    for (const g of new Set(this.generators.values())) g.stop?.();
  }
}
