import { create } from "@bufbuild/protobuf";
import { type ImportResult, ImportResultSchema } from "@gov/api";
import { StoreUnavailableError, turnTaker, WriteOutcomeUnknownError } from "@gov/service-kit";
import type { ConfigStore } from "./store/config-store.js";
import type { ImportEntry } from "./zip-archive.js";
import { canceled } from "./zip-reader.js";

export type ImportOutcome = "created" | "updated" | "unchanged" | "skipped" | "rejected";

const row = (configId: string, outcome: ImportOutcome, reason?: string): ImportResult => create(ImportResultSchema, { configId, outcome, reason });

/**
 * Writes the configs of a checked archive, one store write per entry, in archive order, and answers one row per
 * entry. A store outage stops the import but not the answer: the rows say what was written, which entry's outcome is
 * unknown (a write sent but unanswered) and which were not applied — the same ImportResult on REST and Connect,
 * never a bare 503 after part of the archive was written. A client that goes away stops it between two writes.
 */
export async function importEntries(
  store: ConfigStore,
  namespace: string,
  entries: ImportEntry[],
  policy: "skip" | "overwrite",
  opts: { now: () => number; hash: (data: string) => string; signal: AbortSignal; indexed?: () => Promise<void> },
): Promise<{ results: ImportResult[]; succeeded: number }> {
  const results: ImportResult[] = [];
  let succeeded = 0;
  let stoppedBy: string | undefined;
  // Each write awaits the store, but an in-process store answers without giving other requests a turn.
  const turns = turnTaker();
  for (const entry of entries) {
    await turns.maybe();
    if (!("data" in entry)) {
      results.push(row(entry.configId, entry.outcome, entry.reason));
      continue;
    }
    const { configId, data } = entry;
    if (stoppedBy) {
      results.push(row(configId, "rejected", `not applied: ${stoppedBy}`));
      continue;
    }
    if (opts.signal.aborted) throw canceled();
    let writing = false;
    try {
      // overwrite: the look tells "created" from "updated" in the row; what is stored is the write's to decide
      const existing = policy === "skip" ? undefined : await store.get(namespace, configId);
      // Indexed before each write, not once per import (cached: no store call): a namespace deleted part way is
      // listed again by the entries written after it.
      await opts.indexed?.();
      writing = true;
      if (policy === "skip") {
        // Whether the config exists is decided by the write itself: a look first, then a write, replaced a config
        // that another client wrote in between (its acknowledged PUT overwritten by an import told to leave it).
        const created = await store.create(namespace, configId, data, opts.hash(data), opts.now());
        if (created) succeeded++;
        results.push(created ? row(configId, "created") : row(configId, "skipped", "exists (use policy=overwrite to replace it)"));
      } else {
        const { changed } = await store.set(namespace, configId, data, opts.hash(data), opts.now());
        if (changed) succeeded++;
        results.push(row(configId, !existing ? "created" : changed ? "updated" : "unchanged"));
      }
    } catch (err) {
      if (!(err instanceof StoreUnavailableError)) throw err;
      const cause = err.message;
      stoppedBy = `the store became unavailable at entry "${configId}" and the import stopped there; import the archive again when the store is back (policy skip leaves what was already imported alone)`;
      results.push(row(configId, "rejected", writing && err instanceof WriteOutcomeUnknownError ? `outcome unknown: ${cause}` : `not applied: ${cause}`));
    }
  }
  return { results, succeeded };
}
