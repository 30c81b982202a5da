/**
 * `count` config ids as a large namespace has them — sharing a long prefix (a reverse domain name and a group), which
 * makes every comparison of a sort walk it — in an order unlike the sorted one (shuffled with a fixed seed): for the
 * tests of listing a 100,000-config namespace, whose sort is part of what they measure (75–95 ms in one piece for these,
 * 30–40 ms for ids that differ by their 10th character).
 */
export function shuffledConfigIds(count: number): string[] {
  const ids = Array.from({ length: count }, (_, i) => `com.example.platform.services/order-service-${String(i).padStart(6, "0")}/application-${i % 97}.yaml`);
  let seed = 42;
  for (let i = ids.length - 1; i > 0; i--) {
    seed = (seed * 1_103_515_245 + 12_345) >>> 0;
    const j = seed % (i + 1);
    [ids[i], ids[j]] = [ids[j], ids[i]];
  }
  return ids;
}
