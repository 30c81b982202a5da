/**
 * Weighted random choice, the same rule as the server's `/lb` (services/registry/src/choose-instance.ts): each item of
 * weight above 0 is chosen with probability weight / total weight; weight 0 is never chosen; undefined when no item
 * has weight above 0. A copy rather than an import so that the client does not depend on the server package; the
 * test checks both pick the same item for the same random draw.
 */
export function chooseWeighted<T extends { weight: number }>(items: readonly T[], random: () => number = Math.random): T | undefined {
  let total = 0;
  for (const r of items) if (r.weight > 0) total += r.weight;
  if (total === 0) return undefined;
  let point = random() * total;
  let last: T | undefined;
  for (const r of items) {
    if (r.weight <= 0) continue;
    if (point < r.weight) return r;
    point -= r.weight;
    last = r;
  }
  return last; // rounding left the point at the very end
}
