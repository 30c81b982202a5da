import { NO_OUTCOME, type AuditRecord, type RoleRecord, type SecurityChange, type SecurityStore, type UserPatch, type UserRecord } from "./security-store.js";

const copyUser = (u: UserRecord): UserRecord => ({ ...u, roles: [...u.roles] });
// Field by field, not `{ ...e }`: object spread showed up at several µs per audited call under load (line profile).
const copyAudit = (e: AuditRecord): AuditRecord => ({ id: e.id, operator: e.operator, ip: e.ip, resource: e.resource, action: e.action, status: e.status, msg: e.msg, opTime: e.opTime });
const copyRole = (r: RoleRecord): RoleRecord => ({ ...r, bindings: r.bindings.map((b) => ({ ...b })) });

/** Distinct strings kept by {@link interner} before it starts afresh (a flood of distinct values must not grow it). */
const INTERNED_MAX = 10_000;

/**
 * One string for equal texts. The log keeps up to max-entries entries (100,000 by default) in this process's heap, and
 * each call builds its resource and client address anew: kept as they come, they are several more objects per entry that
 * survive the young generation, for the same few paths and addresses over and over. Shared, an entry keeps little more
 * than its own object and id: an audited embedded PUT spent 1.3 µs in scavenges instead of 2.0 (--trace-gc, ~130,000 PUTs each).
 */
function interner(): (text: string) => string {
  let known = new Map<string, string>();
  return (text) => {
    const seen = known.get(text);
    if (seen !== undefined) return seen;
    if (known.size >= INTERNED_MAX) known = new Map();
    known.set(text, text);
    return text;
  };
}

/** The embedded store (contract §1): the same behaviour as Redis, in this process, for trying the product and tests. */
/** Entries per part of a scan of the audit log. */
const MEMORY_AUDIT_PART = 2000;

export function createMemorySecurityStore(): SecurityStore {
  const users = new Map<string, UserRecord>();
  const roles = new Map<string, RoleRecord>();
  let audit: AuditRecord[] = []; // oldest first
  const shared = interner();
  const open = new Map<string, AuditRecord>(); // entries of calls under way
  const openNewestFirst = (before: number) =>
    [...open.values()].filter((e) => e.opTime < before).sort((a, b) => b.opTime - a.opTime).map(copyAudit);
  let kept = Number.MAX_SAFE_INTEGER;
  let key: string | undefined;
  const listeners = new Set<(change: SecurityChange) => void>();
  const announce = (change: SecurityChange) => {
    for (const l of listeners) l(change);
  };
  const store: SecurityStore = {
    kind: "embedded",
    async getUser(username) {
      const u = users.get(username);
      return u && copyUser(u);
    },
    async listUsers() {
      return [...users.values()].map(copyUser);
    },
    async addUser(user) {
      if (users.has(user.username)) return false;
      users.set(user.username, copyUser(user));
      announce({ kind: "user", name: user.username });
      return true;
    },
    async updateUser(username, patch: UserPatch) {
      const u = users.get(username);
      if (!u) return false;
      users.set(username, copyUser({ ...u, ...patch }));
      announce({ kind: "user", name: username });
      return true;
    },
    async bindRoles(username, names, mustExist) {
      const u = users.get(username);
      if (!u) return "no-user";
      const missing = mustExist.find((r) => !roles.has(r));
      if (missing !== undefined) return { missingRole: missing };
      users.set(username, copyUser({ ...u, roles: [...names] }));
      announce({ kind: "user", name: username });
      return "bound";
    },
    async removeUser(username) {
      if (!users.delete(username)) return false;
      announce({ kind: "user", name: username });
      return true;
    },
    async chargeAttempt(username, maxFailures, lockUntil, now) {
      const u = users.get(username);
      if (!u) return "no-user";
      if (u.locked || u.lockedUntil > now) return "locked";
      u.failures++;
      const locks = u.failures > maxFailures;
      if (locks) {
        u.failures = 0;
        u.lockedUntil = lockUntil;
      }
      announce({ kind: "user", name: username });
      return locks ? "locked" : u.failures;
    },
    async getRole(name) {
      const r = roles.get(name);
      return r && copyRole(r);
    },
    async listRoles() {
      return [...roles.values()].map(copyRole);
    },
    async putRole(role) {
      roles.set(role.name, copyRole(role));
      announce({ kind: "role", name: role.name });
      return "saved"; // a removal here is one step: it never stays unfinished
    },
    async removeRole(name) {
      if (!roles.delete(name)) return false;
      // unbound from its users: a role created later under this name must grant them nothing
      for (const u of users.values()) {
        if (!u.roles.includes(name)) continue;
        u.roles = u.roles.filter((r) => r !== name);
        announce({ kind: "user", name: u.username });
      }
      announce({ kind: "role", name });
      return true;
    },
    async openAudit(entries) {
      for (const e of entries) open.set(e.id, copyAudit(e));
    },
    async appendAudit(entries, maxEntries, skipLoggedAmong = 0) {
      // a larger retention than before must not bring back what the smaller one dropped (Redis trims at once)
      if (maxEntries > kept && audit.length > kept) audit = audit.slice(audit.length - kept);
      const logged = new Set(skipLoggedAmong > 0 ? audit.slice(-Math.min(skipLoggedAmong, kept)).map((e) => e.id) : []);
      for (const e of entries) {
        open.delete(e.id);
        if (logged.has(e.id)) continue;
        audit.push({ id: e.id, operator: shared(e.operator), ip: shared(e.ip), resource: shared(e.resource), action: e.action, status: e.status, msg: e.msg, opTime: e.opTime });
      }
      // Trimmed in steps (a copy per append would cost O(max-entries) per batch); reads see only the newest maxEntries.
      if (audit.length > maxEntries + Math.max(1000, maxEntries >> 3)) audit = audit.slice(audit.length - maxEntries);
      kept = maxEntries;
    },
    async closeAudit(outcomes, maxEntries) {
      const closed: AuditRecord[] = [];
      const missing: string[] = [];
      for (const o of outcomes) {
        const e = open.get(o.id);
        if (e && e.status === 0 && e.msg === NO_OUTCOME) {
          // the store's own copy, which appendAudit copies into the log and drops from `open`
          e.status = o.status;
          e.msg = o.msg;
          closed.push(e);
        } else missing.push(o.id);
      }
      await store.appendAudit(closed, maxEntries);
      return missing;
    },
    async sweepAudit(before, maxEntries) {
      const orphans = [...open.values()].filter((e) => e.opTime < before).sort((a, b) => a.opTime - b.opTime);
      if (orphans.length > 0) await store.appendAudit(orphans, maxEntries);
      return orphans.length;
    },
    async *scanAudit(openBefore) {
      yield openNewestFirst(openBefore);
      // newest first, a part at a time, of the log as it is now (a list of references: appends and trims meanwhile
      // move the log's indices, not this)
      const log = audit.slice(Math.max(0, audit.length - kept));
      for (let end = log.length; end > 0; end -= MEMORY_AUDIT_PART) yield log.slice(Math.max(0, end - MEMORY_AUDIT_PART), end).map(copyAudit).reverse();
    },
    async readAuditPage(offset, limit, openBefore) {
      const opened = openNewestFirst(openBefore);
      const total = opened.length + Math.min(audit.length, kept);
      const fromOpen = opened.slice(offset, offset + limit);
      const logOffset = Math.max(0, offset - opened.length);
      const logLimit = limit - fromOpen.length;
      const end = audit.length - logOffset; // newest first: index audit.length - 1 is entry 0
      const logged = logLimit <= 0 ? [] : audit.slice(Math.max(audit.length - Math.min(audit.length, kept), end - logLimit), Math.max(0, end)).map(copyAudit).reverse();
      return { entries: [...fromOpen, ...logged], total };
    },
    async jwtKey(candidate) {
      key ??= candidate;
      return key;
    },
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      listeners.clear();
    },
  };
  return store;
}
