import { Code, ConnectError } from "@connectrpc/connect";
import { outageLogFields, type Logger } from "@gov/service-kit";
import type { AuditRecord, SecurityStore } from "./store/security-store.js";

/** Entries per store call: one Lua call's arguments stay far below Lua's stack limit. */
const BATCH = 500;
/** Entries waiting for the store before callers are made to wait too (a long outage must not grow memory unbounded). */
const MAX_PENDING = 100_000;
/** How long a refused call's answer waits for its entry to be stored while the store is failing. */
const REFUSED_WAIT_MS = 1000;
/** An opened entry with no outcome after this long belongs to a call whose process died: sweep it into the log. */
export const ORPHAN_AFTER_MS = 10 * 60_000;
const SWEEP_EVERY_MS = 60_000;

/**
 * Queries show an entry without an outcome once it is this old: by then its call is long over unless its process died
 * (younger ones are calls under way, whose outcome is about to replace them).
 */
export const OPEN_SHOWN_AFTER_MS = 10_000;

export { NO_OUTCOME } from "./store/security-store.js";

type Done = (stored: boolean) => void;

/**
 * Outcomes on their way to the store, one store call per batch of whatever queued meanwhile. A refused batch stays
 * queued and is retried every 500 ms (outcomes must not be lost); callers waiting for it are told it failed and go on.
 */
function outcomeQueue<T>(write: (batch: T[]) => Promise<void>, logger: Logger) {
  let entries: T[] = [];
  let dones: (Done | undefined)[] = [];
  let flushing: Promise<void> | undefined;
  let retry: NodeJS.Timeout | undefined;
  let failing = false;
  /** Stopped at shutdown: what is still queued has been reported lost, and is neither retried nor reported again. */
  let stopped = false;
  const drained: (() => void)[] = [];

  const flush = async (): Promise<void> => {
    while (entries.length > 0) {
      const batch = entries.slice(0, BATCH);
      const told = dones.slice(0, BATCH);
      try {
        await write(batch);
      } catch (err) {
        if (stopped) return;
        if (!failing) logger.warn({ ...outageLogFields(err), pending: entries.length }, "audit log: the store refused entries; they are kept and retried");
        failing = true;
        retry = setTimeout(schedule, 500);
        for (const d of told) d?.(false); // waiting callers go on; the entries stay queued
        return;
      }
      if (failing) logger.info("audit log: the store takes entries again");
      failing = false;
      entries = entries.slice(batch.length);
      dones = dones.slice(batch.length);
      for (const d of told) d?.(true);
    }
    for (const d of drained.splice(0)) d();
  };
  function schedule(): void {
    clearTimeout(retry);
    retry = undefined;
    flushing ??= flush().finally(() => {
      flushing = undefined;
      if (entries.length > 0 && !retry && !stopped) schedule();
    });
  }
  return {
    get length() {
      return entries.length;
    },
    push(entry: T, done?: Done): void {
      entries.push(entry);
      dones.push(done);
      if (!flushing && !retry) queueMicrotask(schedule);
    },
    whenDrained: () => new Promise<void>((resolve) => drained.push(resolve)),
    async flushed(): Promise<void> {
      while (entries.length > 0 && !stopped) {
        if (!flushing && !retry) schedule();
        await (flushing ?? new Promise((r) => setTimeout(r, 50)));
      }
    },
    stop(): void {
      stopped = true;
      clearTimeout(retry);
      retry = undefined;
    },
  };
}

/** An entry with its outcome, queued; `opened`: its open entry was stored; `closed`: its outcome is stored (a batch's retry skips it). */
interface Outcome {
  entry: AuditRecord;
  opened: boolean;
  closed: boolean;
}

/**
 * Stores a batch of outcomes: those of opened entries as just their outcome (the store moves the open entry into the log
 * with it; less to send and build than the entry again, which is most of what an audited call costs the process), the
 * rest — and any whose open entry the store did not have (a failover lost it, or it was swept) — whole. What was stored
 * before a failure is marked, so that the batch's retry does not store it twice.
 */
async function writeOutcomes(store: SecurityStore, batch: Outcome[], maxEntries: number): Promise<void> {
  const toClose = batch.filter((o) => o.opened && !o.closed);
  if (toClose.length > 0) {
    const missing = new Set(await store.closeAudit(toClose.map(({ entry: e }) => ({ id: e.id, status: e.status, msg: e.msg })), maxEntries));
    for (const o of toClose) {
      if (missing.has(o.entry.id)) o.opened = false;
      else o.closed = true;
    }
  }
  const whole = batch.filter((o) => !o.opened && !o.closed);
  if (whole.length > 0) await store.appendAudit(whole.map((o) => o.entry), maxEntries);
}

/**
 * Opened entries go to the store in batches, one per turn of the event loop: every call whose request was read in that
 * turn opens its entry in the same store call, sent at the turn's end (`setImmediate`), right behind the store writes
 * those calls' handlers started (one store call per batch, not per call: each costs the process ~20 µs of client work).
 * Every caller of a batch shares its one promise. A batch is not held back until the one before it is stored: its
 * answers would wait for that round trip too, and held answers cost an audited Redis `PUT` 7–12 % of its CPU (one
 * process, switched between the two by a signal, 24 pairs). A refused batch is not retried: its callers fall back on
 * writing the outcome (see `record(entry, true)`).
 */
function openBatches(store: SecurityStore, logger: Logger) {
  let pending: { entries: AuditRecord[]; written: Promise<boolean> } | undefined;
  const inFlight = new Set<Promise<boolean>>();
  let failing = false;
  const write = async (batch: AuditRecord[]): Promise<boolean> => {
    try {
      for (let i = 0; i < batch.length; i += BATCH) await store.openAudit(i === 0 && batch.length <= BATCH ? batch : batch.slice(i, i + BATCH));
      failing = false;
      return true;
    } catch (err) {
      if (!failing) logger.warn(outageLogFields(err), "audit log: the store refused opened entries; their outcomes will be written instead");
      failing = true;
      return false;
    }
  };
  return {
    open(entry: AuditRecord): Promise<boolean> {
      if (pending === undefined) {
        const entries: AuditRecord[] = [];
        const written = new Promise<boolean>((resolve) =>
          setImmediate(() => {
            pending = undefined;
            resolve(write(entries));
          }),
        );
        inFlight.add(written);
        void written.then(() => inFlight.delete(written));
        pending = { entries, written };
      }
      pending.entries.push(entry);
      return pending.written;
    },
    async flushed(): Promise<void> {
      await Promise.all([...inFlight]);
    },
  };
}

/**
 * Writes audit entries in batches, so that a call pays no store round trip of its own (contract §7), and never loses
 * the entry of a call it answered:
 *
 * 1. `open(entry)` as the call starts: the entry, without its outcome, goes to the store in the next batch while the
 *    handler runs; the answer waits for that batch (usually long stored by the time the handler is done).
 * 2. `record(entry)` with the outcome after the answer: replaces the open entry, batched, off the request path.
 *
 * A process killed between the two leaves the open entry, shown with status 0 and {@link NO_OUTCOME}; every writer
 * sweeps such entries into the log once they are {@link ORPHAN_AFTER_MS} old (retention then applies to them). An
 * entry that could not be opened (store failing) has its outcome write retried until the store takes it; past
 * MAX_PENDING queued outcomes `record` waits for the queue to drain instead of dropping anything.
 */
export function createAuditWriter(
  store: SecurityStore,
  maxEntries: number,
  logger: Logger,
  options: { now?: () => number; sweepEveryMs?: number } = {},
) {
  const now = options.now ?? Date.now;
  // An entry is opened before the answer so that it outlives this process dying between the answer and its outcome's
  // write, and entries are batched to share store round trips. The embedded store is this process's memory: it dies
  // with the process and has no round trip, so there each entry is written once, whole, with its outcome, straight
  // into the store before the answer leaves (the open step and the batching cost an audited embedded PUT ~10 % of its
  // throughput, A/B).
  const opensEntries = store.kind !== "embedded";
  const embeddedRefused = (err: unknown) => logger.error({ err }, "audit log: the embedded store refused an entry");
  const opened = openBatches(store, logger);
  const outcomes = outcomeQueue((batch: Outcome[]) => writeOutcomes(store, batch, maxEntries), logger);
  const sweep = (): Promise<void> =>
    store.sweepAudit(now() - ORPHAN_AFTER_MS, maxEntries).then(
      (moved) => {
        if (moved > 0) logger.warn({ moved }, "audit log: entries of calls whose process stopped before recording their outcome were kept with status 0");
      },
      (err) => logger.debug({ err }, "audit log: sweeping entries without an outcome failed; the next sweep retries"),
    );
  const sweeper = setInterval(() => void sweep(), options.sweepEveryMs ?? SWEEP_EVERY_MS);
  sweeper.unref();

  return {
    /** false on the embedded store: entries are not opened, `record` stores them whole (see above). */
    opensEntries,
    /**
     * Stores the entry (status 0, msg {@link NO_OUTCOME}: its outcome is not known yet); resolves true once stored,
     * false if the store refused it. Every call of one tick shares one store call and one promise.
     */
    open: opened.open,
    /**
     * Records the entry with its outcome. On the embedded store it is stored whole at once and nothing waits. Elsewhere
     * it is queued: `wait` resolves once it is stored (or after REFUSED_WAIT_MS of a failing store) — for calls whose
     * entry was never opened; it is stored whole. Otherwise (its entry was opened, with the same fields) only the
     * outcome is sent, and a promise is returned only when the queue is full.
     */
    record(entry: AuditRecord, wait = false): Promise<void> | undefined {
      if (!opensEntries) {
        // stored synchronously (the embedded store's writes complete before their promise is returned)
        store.appendAudit([entry], maxEntries).catch(embeddedRefused);
        return undefined;
      }
      if (wait) {
        return new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, REFUSED_WAIT_MS);
          // waiting: its entry was never opened, so it is stored whole
          outcomes.push({ entry, opened: false, closed: false }, () => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      outcomes.push({ entry, opened: true, closed: false });
      if (outcomes.length < MAX_PENDING) return undefined;
      return outcomes.whenDrained();
    },
    /** Resolves when every outcome recorded so far is in the store (tests, shutdown). */
    async flushed(): Promise<void> {
      await opened.flushed();
      await outcomes.flushed();
    },
    /** Runs one sweep of entries without an outcome now (tests). */
    sweep,
    async close(): Promise<void> {
      clearInterval(sweeper);
      try {
        await Promise.race([this.flushed(), new Promise((r) => setTimeout(r, 5000).unref())]);
      } finally {
        // the one word on what is left: a write still failing after this is not retried, nor reported again
        outcomes.stop();
        if (outcomes.length > 0) logger.error({ lost: outcomes.length }, "audit log: entries could not be written before shutdown");
      }
    },
  };
}

export type AuditWriter = ReturnType<typeof createAuditWriter>;

export interface AuditFilter {
  query: string;
  from: string;
  to: string;
  successful?: boolean;
}

function parseTime(raw: string, name: string): number | undefined {
  if (raw === "") return undefined;
  const t = Date.parse(raw);
  if (!/^\d{4}-\d\d-\d\dT/.test(raw) || Number.isNaN(t)) throw new ConnectError(`${name} must be an RFC 3339 time such as 2026-11-23T10:00:00Z, not "${raw.slice(0, 64)}"`, Code.InvalidArgument);
  return t;
}

/** The predicate of a query's filters; bad bounds are invalid_argument. */
export function auditMatcher(f: AuditFilter): (e: AuditRecord) => boolean {
  const from = parseTime(f.from, "from");
  const to = parseTime(f.to, "to");
  if (from !== undefined && to !== undefined && from > to) throw new ConnectError(`from (${f.from.slice(0, 64)}) is after to (${f.to.slice(0, 64)}): no entry can match; swap them`, Code.InvalidArgument);
  const q = f.query.toLowerCase();
  if (q.length > 256) throw new ConnectError("query is longer than 256 characters", Code.InvalidArgument);
  return (e) =>
    (from === undefined || e.opTime >= from) &&
    (to === undefined || e.opTime <= to) &&
    (f.successful === undefined || (e.status > 0 && e.status < 400) === f.successful) &&
    (q === "" || [e.operator, e.ip, e.resource, e.action, e.msg].some((s) => s.toLowerCase().includes(q)) || decodedPath(e.resource).toLowerCase().includes(q));
}

/**
 * A resource as a person types it: its path keeps the escapes a value needs to stay one segment (`dir%2Fdb.json`), so
 * a query for `dir/db.json` matches the decoded form too.
 */
function decodedPath(resource: string): string {
  if (!resource.includes("%")) return resource;
  try {
    return decodeURIComponent(resource);
  } catch {
    return resource;
  }
}

/** The contract's CSV header. */
export const CSV_HEADER = ["Timestamp", "Operator", "Client IP", "Resource", "Action", "Status", "Message"];

/** One quoted cell; a cell a spreadsheet would run as a formula (= + - @ TAB CR) gets a leading `'`. */
export function csvCell(value: string): string {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return `"${safe.replaceAll('"', '""')}"`;
}

export const csvRow = (cells: string[]) => `${cells.map(csvCell).join(",")}\r\n`;

export const csvRecord = (e: AuditRecord) => csvRow([new Date(e.opTime).toISOString(), e.operator, e.ip, e.resource, e.action, String(e.status), e.msg]);
