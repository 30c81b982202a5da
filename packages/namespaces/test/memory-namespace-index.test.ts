import { createMemoryNamespaceIndex } from "../src/memory-namespace-index.js";
import type { NamespaceIndex } from "../src/namespace-index.js";
import { describeNamespaceIndexContract } from "./namespace-index.contract.js";

// The embedded index is one per process: opening "again" on the same system namespace is the same instance.
const bySystem = new Map<string, NamespaceIndex>();
describeNamespaceIndexContract("embedded", async (system) => {
  let index = bySystem.get(system);
  if (!index) bySystem.set(system, (index = createMemoryNamespaceIndex(system)));
  return index;
});
