import { randomInt } from "node:crypto";
import { SafeSnowflakeId, radix62Converter } from "@gov/idgen";

/**
 * Where audit entry ids come from. A process-wide generator is being added to the module context (ModuleContext);
 * until then the module makes its own Snowflake from @gov/idgen with a random machine id.
 */
export interface IdSource {
  nextId(): string;
}

export function localIdSource(): IdSource {
  // 53-bit layout: time-ordered, JSON-safe. A random machine id (no lease): two replicas collide only if they draw
  // the same one in the same millisecond and sequence; the lead replaces this with the process-wide generator.
  const gen = new SafeSnowflakeId({ name: "audit-log", machine: randomInt(0, 8), converter: radix62Converter() });
  return { nextId: () => gen.nextIdAsString() };
}
