import { Code, ConnectError } from "@connectrpc/connect";
import { outageLogFields, withoutRetryAdvice, type Logger } from "@gov/service-kit";
import type { AuditRecord, SecurityStore } from "./store/security-store.js";

/** Entries per store call: one Lua call's arguments stay far below Lua's stack limit. */
const BATCH = 500;
/** Entries waiting for the store before callers are made to wait too (a long outage must not grow memory unbounded). */
const MAX_PENDING = 100_000;
/**
 * How long a refused call's (or a login's) answer waits for its entry to be stored while the store is failing, beyond
 * what a durable write may spend waiting for replicas (`replicaWaitMs`).
 */
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

const counted = new WeakSet<object>();

/**
 * Marks a refused login as one that the lockout bounds (a wrong password counted toward its user's lock: at most
 * `gov.security.login.max-failures` per user per lock): the audit log records it whatever the budget of anonymous
 * refusals, so that guesses at a real user's password are all in the log.
 */
export function countedRefusal<E extends object>(err: E): E {
  counted.add(err);
  return err;
}
export const isCountedRefusal = (err: unknown): boolean => typeof err === "object" && err !== null && counted.has(err);

type Done = (stored: boolean) => void;

/**
 * Outcomes on their way to the store, one store call per batch of whatever queued meanwhile. A refused batch stays
 * queued and is retried every 500 ms (outcomes must not be lost); callers waiting for it are told it failed and go on.
 */
function outcomeQueue<T>(write: (batch: T[]) => Promise<void>, logger: Logger, refused: (err: unknown) => void) {
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
        refused(err);
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

/**
 * An entry with its outcome, queued; `opened`: its open entry was stored; `closed`: its outcome is stored (a batch's
 * retry skips it); `unsure`: a write of it failed, and may have been applied all the same (a reply lost, a command
 * timed out that Redis ran later).
 */
interface Outcome {
  entry: AuditRecord;
  opened: boolean;
  closed: boolean;
  unsure?: boolean;
}

/**
 * How far back in the log a retry looks for its entries before appending them (see appendAudit): a write that failed
 * with an unknown outcome and was applied sits this close to the log's head unless ten thousand entries were written
 * meanwhile. Read only by retries, which are rare; the check costs Redis ~8 ms then (measured with 20,000 typical entries).
 */
export const RETRY_DEDUP_DEPTH = 10_000;

/**
 * Stores a batch of outcomes: those of opened entries as just their outcome (the store moves the open entry into the log
 * with it; less to send and build than the entry again, which is most of what an audited call costs the process), the
 * rest — and any whose open entry the store did not have (a failover lost it, or it was swept) — whole. What was stored
 * before a failure is marked, so that the batch's retry does not store it twice.
 */
async function writeOutcomes(store: SecurityStore, batch: Outcome[], maxEntries: number): Promise<void> {
  try {
    const toClose = batch.filter((o) => o.opened && !o.closed);
    if (toClose.length > 0) {
      const missing = new Set(await store.closeAudit(toClose.map(({ entry: e }) => ({ id: e.id, status: e.status, msg: e.msg })), maxEntries));
      for (const o of toClose) {
        if (missing.has(o.entry.id)) o.opened = false;
        else o.closed = true;
      }
    }
    const whole = batch.filter((o) => !o.opened && !o.closed);
    // A close that was applied though it failed leaves its entry in the log, not open: the retry finds it "missing" and
    // would append it whole a second time, as it would an append applied though it failed. Those look first.
    if (whole.length > 0) await store.appendAudit(whole.map((o) => o.entry), maxEntries, whole.some((o) => o.unsure) ? RETRY_DEDUP_DEPTH : 0);
  } catch (err) {
    for (const o of batch) if (!o.closed) o.unsure = true;
    throw err;
  }
}

/** A refusal as the audit log's answers quote it: the store's own message, without its own advice (the answer has its own). */
const refusalText = (err: unknown): string => withoutRetryAdvice(err).slice(0, 512);

/**
 * Opened entries go to the store in batches, one per turn of the event loop: every call whose request was read in that
 * turn opens its entry in the same store call, sent at the turn's end (`setImmediate`), right behind the store writes
 * those calls' handlers started (one store call per batch, not per call: each costs the process ~20 µs of client work).
 * Every caller of a batch shares its one promise. A batch is not held back until the one before it is stored: its
 * answers would wait for that round trip too, and held answers cost an audited Redis `PUT` 7–12 % of its CPU (one
 * process, switched between the two by a signal, 24 pairs). A refused batch is not retried: its callers fall back on
 * writing the outcome (see `record(entry, true)`), and the store counts as failing until a batch is stored again
 * (`failing`): the guard then opens each entry before running the call (see `auditOpenInterceptor`).
 */
function openBatches(store: SecurityStore, logger: Logger, refused: (err: unknown) => void) {
  let pending: { entries: AuditRecord[]; written: Promise<boolean> } | undefined;
  const inFlight = new Set<Promise<boolean>>();
  let failing = false;
  const write = async (batch: AuditRecord[]): Promise<boolean> => {
    try {
      for (let i = 0; i < batch.length; i += BATCH) await store.openAudit(i === 0 && batch.length <= BATCH ? batch : batch.slice(i, i + BATCH));
      if (failing) logger.info("audit log: the store takes opened entries again; calls run alongside their entry's write again");
      failing = false;
      return true;
    } catch (err) {
      if (!failing) logger.warn(outageLogFields(err), "audit log: the store refused opened entries; until it takes them again, calls are not answered successfully unless their entry is stored");
      failing = true;
      refused(err);
      return false;
    }
  };
  return {
    get failing() {
      return failing;
    },
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
 * entry that could not be opened (store failing) is written whole with its outcome, and the answer waits for that
 * (`record(entry, true)` resolves whether it was stored in time): a call whose entry is in this process's memory only
 * is not answered successfully (fail closed, see the guard), since a SIGKILL would lose it. Such an entry is still
 * retried until the store takes it; past MAX_PENDING queued outcomes `record` waits for the queue to drain instead of
 * dropping anything.
 */
export function createAuditWriter(
  store: SecurityStore,
  maxEntries: number,
  logger: Logger,
  options: {
    now?: () => number;
    sweepEveryMs?: number;
    /**
     * How long a write of the store may wait for replicas (`gov.redis.replica-ack-timeout` under
     * `gov.redis.min-replicas`; see replicaWaitMsOf): with a shard short of replicas every write takes all of it, and a
     * login's entry, waited for 1 s, never made it — every login answered 503 after a failover until a replica was back.
     */
    replicaWaitMs?: number;
  } = {},
) {
  const now = options.now ?? Date.now;
  const refusedWaitMs = REFUSED_WAIT_MS + (options.replicaWaitMs ?? 0);
  // An entry is opened before the answer so that it outlives this process dying between the answer and its outcome's
  // write, and entries are batched to share store round trips. The embedded store is this process's memory: it dies
  // with the process and has no round trip, so there each entry is written once, whole, with its outcome, straight
  // into the store before the answer leaves (the open step and the batching cost an audited embedded PUT ~10 % of its
  // throughput, A/B).
  const opensEntries = store.kind !== "embedded";
  const embeddedRefused = (err: unknown) => logger.error({ err }, "audit log: the embedded store refused an entry");
  // the last refusal of either kind of write, quoted by the answers of calls it stops
  let refusal = "";
  const refused = (err: unknown) => void (refusal = refusalText(err));
  const opened = openBatches(store, logger, refused);
  const outcomes = outcomeQueue((batch: Outcome[]) => writeOutcomes(store, batch, maxEntries), logger, refused);
  const sweep = (): Promise<void> =>
    store.sweepAudit(now() - ORPHAN_AFTER_MS, maxEntries).then(
      (moved) => {
        if (moved > 0) logger.warn({ moved }, "audit log: entries of calls whose process stopped before recording their outcome were kept with status 0");
      },
      (err) => logger.debug({ err }, "audit log: sweeping entries without an outcome failed; the next sweep retries"),
    );
  const sweeper = setInterval(() => void sweep(), options.sweepEveryMs ?? SWEEP_EVERY_MS);
  sweeper.unref();

  /**
   * Records the entry with its outcome. On the embedded store it is stored whole at once and nothing waits. Elsewhere
   * it is queued. `wait`: for calls whose entry was never opened (stored whole); the promise resolves true once it is
   * stored, false after REFUSED_WAIT_MS (plus replicaWaitMs) or at its first refused attempt: the entry is then kept in memory and
   * retried, and it is the same object, so that what the caller changes in it until its write starts is what gets
   * stored (the guard records the answer it gave instead). Otherwise `opened` (default: not `wait`) says whether its
   * entry was opened with the same fields: then only the outcome is sent; if not, the entry is sent whole; and a
   * promise is returned only when the queue is full.
   */
  function record(entry: AuditRecord, wait: true): Promise<boolean> | undefined;
  function record(entry: AuditRecord, wait?: false, opened?: boolean): Promise<void> | undefined;
  function record(entry: AuditRecord, wait: boolean): Promise<boolean> | Promise<void> | undefined;
  function record(entry: AuditRecord, wait = false, opened = !wait): Promise<boolean> | Promise<void> | undefined {
    if (!opensEntries) {
      // stored synchronously (the embedded store's writes complete before their promise is returned)
      store.appendAudit([entry], maxEntries).catch(embeddedRefused);
      return undefined;
    }
    if (wait) {
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), refusedWaitMs);
        // waiting: its entry was never opened, so it is stored whole
        outcomes.push({ entry, opened: false, closed: false }, (stored) => {
          clearTimeout(timer);
          resolve(stored);
        });
      });
    }
    outcomes.push({ entry, opened, closed: false });
    if (outcomes.length < MAX_PENDING) return undefined;
    return outcomes.whenDrained();
  }

  return {
    /** false on the embedded store: entries are not opened, `record` stores them whole (see above). */
    opensEntries,
    /**
     * Stores the entry (status 0, msg {@link NO_OUTCOME}: its outcome is not known yet); resolves true once stored,
     * false if the store refused it. Every call of one tick shares one store call and one promise.
     */
    open: opened.open,
    /**
     * True from a refused open batch until one is stored again: the store that holds the log is failing, so a call run
     * alongside its entry's write would likely have done its work with no entry to show for it. The guard then opens
     * the entry before running the call (a round trip paid only during the outage).
     */
    get failing(): boolean {
      return opened.failing;
    },
    /** Why the store last refused an entry (its message), for the answers that quote it; "" before any refusal. */
    get refusal(): string {
      return refusal;
    },
    record,
    /** Resolves when every outcome recorded so far is in the store (tests, shutdown). */
    async flushed(): Promise<void> {
      await opened.flushed();
      await outcomes.flushed();
    },
    /**
     * Resolves once every outcome recorded so far is in the store (true), or after `ms` (false): a query waits for the
     * entries recorded before it, but not for the whole of an outage of the store that holds them.
     */
    flushedWithin(ms: number): Promise<boolean> {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
      return Promise.race([this.flushed().then(() => true), late]).finally(() => clearTimeout(timer));
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

/** RFC 3339 date-time (§5.6): a date, a time, and the offset it is in ("T" and "Z" in either case). */
const RFC3339 = /^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d{1,9})?([Zz]|[+-]\d\d:\d\d)$/;

/**
 * An audit query's bound as epoch ms. Checked by its grammar, not left to Date.parse, which is lenient both ways that
 * matter here: a time without an offset ("2026-11-28T10:00:00") it reads in the server's own time zone, so one query
 * filtered differently on replicas in different zones; and a day the month does not have ("2026-02-30") it rolls into
 * the next month (March 2) instead of refusing it, as it refuses month 13.
 */
function parseTime(raw: string, name: string): number | undefined {
  if (raw === "") return undefined;
  const refused = () => new ConnectError(`${name} must be an RFC 3339 time with its offset, such as 2026-11-23T10:00:00Z or 2026-11-23T11:00:00+01:00, not "${raw.slice(0, 64)}"`, Code.InvalidArgument);
  const m = RFC3339.exec(raw);
  if (!m) throw refused();
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (month < 1 || month > 12 || day < 1 || day > [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]) {
    throw new ConnectError(`${name} names a day that does not exist (${raw.slice(0, 10)}): send a date of the calendar`, Code.InvalidArgument);
  }
  const t = Date.parse(raw.toUpperCase());
  if (Number.isNaN(t)) throw refused(); // an hour, minute or second out of range, or an offset past ±23:59
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
