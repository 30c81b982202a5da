import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "@gov/service-kit";
import type { AuditRecord, SecurityStore } from "./store/security-store.js";

/** Entries per store call: one Lua call's arguments stay far below Lua's stack limit. */
const BATCH = 500;
/** Entries waiting for the store before callers are made to wait too (a long outage must not grow memory unbounded). */
const MAX_PENDING = 100_000;

/**
 * Writes audit entries off the request path (contract §7): `record` queues the entry and returns; queued entries go to
 * the store in batches, one call per batch, whatever the request rate. An entry the store refused (outage) stays queued
 * and is retried; `close()` writes what is left before the store closes. Past MAX_PENDING queued entries `record`
 * waits for the queue to drain instead of dropping anything.
 */
export function createAuditWriter(store: SecurityStore, maxEntries: number, logger: Logger) {
  let queue: AuditRecord[] = [];
  let flushing: Promise<void> | undefined;
  let retry: NodeJS.Timeout | undefined;
  let failing = false;
  const drained: (() => void)[] = [];

  const flush = async (): Promise<void> => {
    while (queue.length > 0) {
      const batch = queue.slice(0, BATCH);
      try {
        await store.appendAudit(batch, maxEntries);
      } catch (err) {
        if (!failing) logger.warn({ err, pending: queue.length }, "audit log: the store refused entries; they are kept and retried");
        failing = true;
        retry = setTimeout(schedule, 500);
        return;
      }
      if (failing) logger.info("audit log: the store takes entries again");
      failing = false;
      queue = queue.slice(batch.length);
    }
    for (const d of drained.splice(0)) d();
  };
  function schedule(): void {
    clearTimeout(retry);
    retry = undefined;
    flushing ??= flush().finally(() => {
      flushing = undefined;
      if (queue.length > 0 && !retry) schedule();
    });
  }

  return {
    record(entry: AuditRecord): Promise<void> | undefined {
      queue.push(entry);
      if (!flushing && !retry) queueMicrotask(schedule);
      if (queue.length < MAX_PENDING) return undefined;
      return new Promise<void>((resolve) => drained.push(resolve));
    },
    /** Resolves when every entry recorded so far is in the store (tests, shutdown). */
    async flushed(): Promise<void> {
      while (queue.length > 0) {
        if (!flushing && !retry) schedule();
        await (flushing ?? new Promise((r) => setTimeout(r, 50)));
      }
    },
    async close(): Promise<void> {
      clearTimeout(retry);
      retry = undefined;
      try {
        await Promise.race([this.flushed(), new Promise((r) => setTimeout(r, 5000))]);
      } finally {
        if (queue.length > 0) logger.error({ lost: queue.length }, "audit log: entries could not be written before shutdown");
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
  const q = f.query.toLowerCase();
  if (q.length > 256) throw new ConnectError("query is longer than 256 characters", Code.InvalidArgument);
  return (e) =>
    (from === undefined || e.opTime >= from) &&
    (to === undefined || e.opTime <= to) &&
    (f.successful === undefined || (e.status < 400) === f.successful) &&
    (q === "" || [e.operator, e.ip, e.resource, e.action, e.msg].some((s) => s.toLowerCase().includes(q)));
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
