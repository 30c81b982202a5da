import type { DescMethod } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";

/** A call that only reads (`NO_SIDE_EFFECTS`): safe to send again, and nothing was changed if it was cut off. */
export const isReadOnly = (method: DescMethod): boolean => method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS;

/**
 * What every transport tells the caller of a write cut off before its answer (a deadline, a lost connection): it may
 * or may not have been applied, and how to find out. `what`: the call, as the sentence names it.
 */
export const outcomeUnknown = (what = "the write"): string => `${what} may or may not have been applied: read the data back before repeating it`;
