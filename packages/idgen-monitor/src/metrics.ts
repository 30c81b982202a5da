import { SHARE, type IdGen, type IdGenerator } from "@gov/idgen";
import { Counter, Gauge, type Registry } from "prom-client";

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

/** Clock-backwards episodes of a generator: Snowflake reports them in its state, composites on their sequencer. */
function clockBackwardsOf(g: IdGenerator, state: Record<string, unknown>): number | undefined {
  if (typeof state.clockBackwards === "number") return state.clockBackwards;
  const sequencer = (g as { sequencer?: { clockBackwardsCount?: number } }).sequencer;
  return sequencer?.clockBackwardsCount;
}

/**
 * Registers the idgen families on `registry`. Nothing is counted on the id hot path: every value is read from the
 * lease's and the generators' own state when Prometheus scrapes.
 */
export function registerIdgenMetrics(registry: Registry, idgen: IdGen): void {
  const namespace = idgen.config.namespace;
  const ns = { namespace };
  const registers = [registry];
  const lease = () => idgen.lease?.state();

  new Gauge({
    name: "idgen_machine_lease_up",
    help: "1 while the machine-id lease is healthy (manual ids are always up), 0 while the last renewal failed or after the lease was lost",
    labelNames: ["namespace"],
    registers,
    collect() {
      const s = lease();
      this.set(ns, !s || s.status === "UP" ? 1 : 0);
    },
  });
  new Gauge({
    name: "idgen_machine_id",
    help: "The machine id this process holds",
    labelNames: ["namespace"],
    registers,
    collect() {
      this.set(ns, lease()?.machineId ?? idgen.config.machine.machineId);
    },
  });
  new Gauge({
    name: "idgen_machine_lease_last_success_timestamp_seconds",
    help: "Unix time of the last successful lease renewal (or distribution)",
    labelNames: ["namespace"],
    registers,
    collect() {
      const s = lease();
      this.reset();
      if (s) this.set(ns, s.lastRenewalAt / 1000);
    },
  });
  new Gauge({
    name: "idgen_machine_lease_stop_deadline_seconds",
    help: "Unix time at which Snowflake and composite generators stop unless a renewal succeeds first (last success + T - min(10s, T/10))",
    labelNames: ["namespace"],
    registers,
    collect() {
      const s = lease();
      this.reset();
      if (s) this.set(ns, s.stopDeadline / 1000);
    },
  });
  new Counter({
    name: "idgen_machine_lease_renewals_total",
    help: "Lease renewal attempts by result: success, failure (Guard Failed) or lost (the store no longer holds the lease)",
    labelNames: ["namespace", "result"],
    registers,
    collect() {
      const s = lease();
      this.reset();
      if (!s) return;
      for (const result of ["success", "failure", "lost"] as const) this.inc({ namespace, result }, s.renewals[result]);
    },
  });
  new Gauge({
    name: "idgen_machine_lease_consecutive_failures",
    help: "Failed renewals since the last success",
    labelNames: ["namespace"],
    registers,
    collect() {
      this.set(ns, lease()?.consecutiveFailures ?? 0);
    },
  });

  // Per generator: one pass over the registry per scrape, shared by the families below. A scrape collects every
  // family in one synchronous run, so the pass is dropped at the next turn of the event loop.
  type Entry = { name: string; g: IdGenerator; state: Record<string, unknown> };
  let cached: Entry[] | undefined;
  const generators = (): Entry[] => {
    if (!cached) {
      cached = distinctGenerators(idgen).map(([name, g]) => ({ name, g, state: g.describe().state }));
      setImmediate(() => (cached = undefined));
    }
    return cached;
  };
  new Counter({
    name: "idgen_ids_generated_total",
    help: "Ids issued, by generator and kind",
    labelNames: ["namespace", "generator", "kind"],
    registers,
    collect() {
      this.reset();
      for (const { name, g } of generators()) this.inc({ namespace, generator: name, kind: g.kind }, g.generatedCount);
    },
  });
  new Counter({
    name: "idgen_clock_backwards_waits_total",
    help: "Times a generator found the clock behind its last timestamp and waited or refused (Detected clock backwards)",
    labelNames: ["namespace", "generator"],
    registers,
    collect() {
      this.reset();
      for (const { name, g, state } of generators()) {
        const n = clockBackwardsOf(g, state);
        if (n !== undefined) this.inc({ namespace, generator: name }, n);
      }
    },
  });
  new Gauge({
    name: "idgen_segment_remaining_ids",
    help: "Ids a segment chain has reserved and not issued (its runway while the store is down)",
    labelNames: ["namespace", "generator"],
    registers,
    collect() {
      this.reset();
      for (const { name, state } of generators()) if (typeof state.runway === "number") this.set({ namespace, generator: name }, state.runway);
    },
  });
  new Gauge({
    name: "idgen_segment_chain_prefetch_distance",
    help: "Segments a chain keeps reserved ahead (doubles on hunger, halves back)",
    labelNames: ["namespace", "generator"],
    registers,
    collect() {
      this.reset();
      for (const { name, state } of generators()) if (typeof state.prefetchDistance === "number") this.set({ namespace, generator: name }, state.prefetchDistance);
    },
  });
  new Counter({
    name: "idgen_segment_prefetch_failures_total",
    help: "Failed segment prefetches (AppendChain [...] - prefetch failed / prefetch still failing)",
    labelNames: ["namespace", "generator"],
    registers,
    collect() {
      this.reset();
      for (const { name, state } of generators()) if (typeof state.prefetchFailuresTotal === "number") this.inc({ namespace, generator: name }, state.prefetchFailuresTotal);
    },
  });
}
