import type { InstanceRecord } from "./store/registry-store.js";

/**
 * Weighted random choice: each instance of weight above 0 is chosen with probability weight / total weight; weight 0
 * is never chosen. undefined when no instance has weight above 0. `random` returns [0, 1) (Math.random by default).
 */
export function chooseWeighted(instances: readonly InstanceRecord[], random: () => number = Math.random): InstanceRecord | undefined {
  let total = 0;
  for (const r of instances) if (r.weight > 0) total += r.weight;
  if (total === 0) return undefined;
  let point = random() * total;
  let last: InstanceRecord | undefined;
  for (const r of instances) {
    if (r.weight <= 0) continue;
    if (point < r.weight) return r;
    point -= r.weight;
    last = r;
  }
  return last; // rounding left the point at the very end
}
