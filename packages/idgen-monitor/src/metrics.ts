import { SHARE, type IdGen, type IdGenerator } from "@gov/idgen";
import type { Registry } from "prom-client";

/** Every metric family the monitor exports (README "Operating", alert rules and the dashboard use these names). */
export const IDGEN_METRIC_NAMES = [
  "idgen_machine_lease_up",
  "idgen_machine_id",
  "idgen_machine_lease_last_success_timestamp_seconds",
  "idgen_machine_lease_stop_deadline_seconds",
  "idgen_machine_lease_renewals_total",
  "idgen_machine_lease_consecutive_failures",
  "idgen_ids_generated_total",
  "idgen_clock_backwards_waits_total",
  "idgen_segment_remaining_ids",
  "idgen_segment_chain_prefetch_distance",
  "idgen_segment_prefetch_failures_total",
] as const;

/**
 * Each generator once, under its registry name: `__share__` is an alias of another entry (usually `snowflake`) and
 * is skipped when that entry is listed too, so its ids are not counted twice.
 */
export function distinctGenerators(idgen: IdGen): [string, IdGenerator][] {
  const seen = new Set<IdGenerator>();
  const out: [string, IdGenerator][] = [];
  const names = idgen.registry.names();
  // the share entry last: a generator listed under its own name is reported under that name
  for (const name of [...names.filter((n) => n !== SHARE), ...names.filter((n) => n === SHARE)]) {
    const g = idgen.registry.find(name);
    if (!g || seen.has(g)) continue;
    seen.add(g);
    out.push([name, g]);
  }
  return out;
}

/** Clock-backwards episodes of a time-based generator (Snowflake, composite), counted by its tick sequencer. */
const clockBackwardsOf = (g: IdGenerator) => (g as { sequencer?: { clockBackwardsCount?: number } }).sequencer?.clockBackwardsCount;

/** Only segment chains have state worth a family (runway, prefetch); describing every generator costs a scrape. */
const hasSegmentState = (g: IdGenerator) => "runway" in g;

type Labels = Record<string, string>;
type Sample = { value: number; sharedLabels: Labels };

/**
 * A family prom-client's registry renders like its own, with values read at scrape time. Labels go as shared labels:
 * the registry formats each label object once and caches it by identity, so the objects below are kept per series;
 * prom-client's own Gauge/Counter would validate and hash every label set on every scrape (tens of ms at 1,000 series).
 */
function family(name: string, help: string, type: "gauge" | "counter", samples: () => Sample[]) {
  const snapshot = (values: unknown[]) => ({ name, help, type, aggregator: "sum" as const, values });
  return {
    name,
    help,
    type,
    aggregator: "sum" as const,
    getForPromString: async () => snapshot(samples()),
    get: async () => snapshot(samples().map((s) => ({ value: s.value, labels: { ...s.sharedLabels } }))),
    reset: () => {},
  };
}

/**
 * Registers the idgen families on `registry`. Nothing is counted on the id hot path: every value is read from the
 * lease's and the generators' own state when Prometheus scrapes.
 */
export function registerIdgenMetrics(registry: Registry, idgen: IdGen): void {
  const namespace = idgen.config.namespace;
  const ns = { namespace };
  const byResult = { success: { namespace, result: "success" }, failure: { namespace, result: "failure" }, lost: { namespace, result: "lost" } };
  const lease = () => idgen.lease?.state();
  const one = (value: number | undefined): Sample[] => (value === undefined ? [] : [{ value, sharedLabels: ns }]);

  // One pass over the registry per scrape, shared by the per-generator families. A scrape renders every family in
  // one synchronous run, so the pass is dropped at the next turn of the event loop.
  type Entry = { g: IdGenerator; state: Record<string, unknown>; labels: Labels; withKind: Labels };
  const labelCache = new Map<string, Entry>();
  let cached: Entry[] | undefined;
  const generators = (): Entry[] => {
    if (!cached) {
      cached = distinctGenerators(idgen).map(([name, g]) => {
        let e = labelCache.get(name);
        if (!e || e.g !== g) labelCache.set(name, (e = { g, state: {}, labels: { namespace, generator: name }, withKind: { namespace, generator: name, kind: g.kind } }));
        e.state = hasSegmentState(g) ? g.describe().state : {};
        return e;
      });
      if (labelCache.size > cached.length) for (const [name, e] of labelCache) if (!cached.includes(e)) labelCache.delete(name); // removed ones
      setImmediate(() => (cached = undefined));
    }
    return cached;
  };
  const perGenerator = (pick: (e: Entry) => number | undefined): Sample[] => {
    const out: Sample[] = [];
    for (const e of generators()) {
      const value = pick(e);
      if (value !== undefined) out.push({ value, sharedLabels: e.labels });
    }
    return out;
  };
  const num = (v: unknown) => (typeof v === "number" ? v : undefined);

  const families = [
    // no sample at all in a process without a machine id (idgen.machine.enabled=false): it holds none
    family("idgen_machine_lease_up", "1 while the machine-id lease is healthy (manual ids are always up), 0 while the last renewal failed, while a wall-clock jump is checked with the store, or after the lease was lost", "gauge", () => {
      if (!idgen.config.machine.enabled) return [];
      const s = lease();
      return one(!s || s.status === "UP" ? 1 : 0);
    }),
    family("idgen_machine_id", "The machine id this process holds", "gauge", () => (idgen.config.machine.enabled ? one(lease()?.machineId ?? idgen.config.machine.machineId) : [])),
    family("idgen_machine_lease_last_success_timestamp_seconds", "Unix time of the last successful lease renewal (or distribution)", "gauge", () => {
      const s = lease();
      return one(s && s.lastRenewalAt / 1000);
    }),
    family("idgen_machine_lease_stop_deadline_seconds", "Unix time at which Snowflake and composite generators stop unless a renewal succeeds first (last success + T - min(10s, T/10))", "gauge", () => {
      const s = lease();
      return one(s && s.stopDeadline / 1000);
    }),
    family("idgen_machine_lease_renewals_total", "Lease renewal attempts by result: success, failure (Guard Failed) or lost (the store no longer holds the lease)", "counter", () => {
      const s = lease();
      return s ? (["success", "failure", "lost"] as const).map((r) => ({ value: s.renewals[r], sharedLabels: byResult[r] })) : [];
    }),
    family("idgen_machine_lease_consecutive_failures", "Failed renewals since the last success", "gauge", () => one(lease()?.consecutiveFailures ?? 0)),
    family("idgen_ids_generated_total", "Ids issued, by generator and kind", "counter", () => generators().map((e) => ({ value: e.g.generatedCount, sharedLabels: e.withKind }))),
    family("idgen_clock_backwards_waits_total", "Episodes of a generator finding the clock behind its last timestamp (one per Detected clock backwards warning, however many calls then waited or were refused)", "counter", () =>
      perGenerator((e) => clockBackwardsOf(e.g)),
    ),
    family("idgen_segment_remaining_ids", "Ids a segment chain has reserved and not issued (its runway while the store is down)", "gauge", () => perGenerator((e) => num(e.state.runway))),
    family("idgen_segment_chain_prefetch_distance", "Segments a chain keeps reserved ahead (doubles on hunger, halves back)", "gauge", () => perGenerator((e) => num(e.state.prefetchDistance))),
    family("idgen_segment_prefetch_failures_total", "Failed segment prefetches (AppendChain [...] - prefetch failed / prefetch still failing)", "counter", () =>
      perGenerator((e) => num(e.state.prefetchFailuresTotal)),
    ),
  ];
  for (const f of families) registry.registerMetric(f as unknown as Parameters<Registry["registerMetric"]>[0]);
}
