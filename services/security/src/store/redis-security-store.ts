import { durableWriterOf, followChanges, prepareScripts, quitQuietly, redisCaller, redisWriteCaller, runDurableScript, runScript, writeDurably, type FailedWrite, type RedisClient, type SubscriberHub } from "@gov/redis";
import { ADD_USER, APPEND_AUDIT, BIND_ROLES, CHARGE_ATTEMPT, CLOSE_AUDIT, JWT_KEY, READ_AUDIT_PAGE, SWEEP_AUDIT, parseSecurityEvent, REMOVE_ROLE, REMOVE_USER, ROLE_REMOVED, ROLE_UNBIND_PART, securityKeys, SET_ROLE, UNBIND_ROLE, UPDATE_USER } from "./redis-security-scripts.js";
import { OPEN_MARKER, type AuditRecord, type RoleRecord, type SecurityChange, type SecurityStore, type UserPatch, type UserRecord } from "./security-store.js";

export interface RedisSecurityStoreOptions {
  /** The system namespace (`gov-{system}`): every key starts with it. */
  namespace: string;
  kind?: "redis" | "redis-cluster";
  /** The process's Pub/Sub hub; without it the store opens its own and OWNS `client` (quits it on close). */
  hub?: SubscriberHub;
}

function userFields(patch: UserPatch): (string | number)[] {
  const out: (string | number)[] = [];
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined) continue;
    out.push(k, k === "roles" ? JSON.stringify(v) : k === "locked" ? (v ? 1 : 0) : (v as string | number));
  }
  return out;
}

function toUser(username: string, h: Record<string, string>): UserRecord | undefined {
  if (h.hash === undefined) return undefined;
  let roles: unknown;
  try {
    roles = JSON.parse(h.roles ?? "[]");
  } catch {
    roles = [];
  }
  return {
    username,
    salt: h.salt ?? "",
    hash: h.hash,
    roles: Array.isArray(roles) ? roles.filter((r): r is string => typeof r === "string") : [],
    locked: h.locked === "1",
    lockedUntil: Number(h.lockedUntil ?? 0) || 0,
    failures: Number(h.failures ?? 0) || 0,
    ...(h.session ? { session: h.session } : {}),
    ...(h.tokensAfter ? { tokensAfter: Number(h.tokensAfter) } : {}),
  };
}

function toRole(name: string, json: string): RoleRecord {
  const r = JSON.parse(json) as { desc?: string; bindings?: RoleRecord["bindings"] };
  return { name, desc: r.desc ?? "", bindings: Array.isArray(r.bindings) ? r.bindings : [] };
}

const AUDIT_CHUNK = 2000;

function parseAudit(list: string[]): AuditRecord[] {
  return list.flatMap((json) => {
    try {
      return [JSON.parse(json) as AuditRecord];
    } catch {
      return [];
    }
  });
}

const newestFirst = (entries: Iterable<AuditRecord>) => [...entries].sort((a, b) => b.opTime - a.opTime);

/** The security store on Redis (standalone or Cluster), every key in the system namespace's slot. */
export async function createRedisSecurityStore(client: RedisClient, options: RedisSecurityStoreOptions): Promise<SecurityStore> {
  const keys = securityKeys(options.namespace);
  prepareScripts(client, ADD_USER, UPDATE_USER, BIND_ROLES, REMOVE_USER, CHARGE_ATTEMPT, SET_ROLE, REMOVE_ROLE, UNBIND_ROLE, ROLE_REMOVED, APPEND_AUDIT, CLOSE_AUDIT, SWEEP_AUDIT, READ_AUDIT_PAGE, JWT_KEY);
  const call = redisCaller(client);
  const listeners = new Set<(change: SecurityChange) => void>();
  const tell = (change: SecurityChange) => {
    for (const l of listeners) l(change);
  };
  const feed = await followChanges<SecurityChange>(client, {
    hub: options.hub,
    pattern: keys.channel,
    parse: parseSecurityEvent,
    onChange: tell,
    onLost: () => tell({ kind: "all", trusted: false }),
    onLive: () => tell({ kind: "all", trusted: true }),
  });
  let closed = false;
  /**
   * This replica's own change, told to its listeners as soon as Redis answered, not only when the event comes back
   * through Pub/Sub: a password change must end the old sessions for the very next call on this replica (the event
   * still reaches the others, and this one again, which is harmless).
   */
  const told = (change: SecurityChange, changed: boolean): boolean => {
    if (changed) tell(change);
    return changed;
  };
  /**
   * A user or role write an admin asked for: a connection failure answers "outcome unknown" (504, with how to check)
   * when the script may have reached Redis, "nothing was written" (503) when it provably did not — as config and
   * registry writes do (`@gov/redis` write-outcome.ts).
   */
  const written = redisWriteCaller(client, call, (w: FailedWrite) => w);
  const write = <T>(what: string, howToCheck: string, run: () => Promise<T>): Promise<T> => written({ what, howToCheck }, run);
  const listUsersToCheck = "list the users (GET /v1/users, or ListUsers), which shows each user's roles and whether it is locked";
  const store: SecurityStore = {
    kind: options.kind ?? "redis",
    async getUser(username) {
      return toUser(username, await call(() => client.hgetall(keys.user(username))));
    },
    async listUsers() {
      const names = await call(() => client.smembers(keys.users));
      if (names.length === 0) return [];
      const pipeline = client.pipeline();
      for (const n of names) pipeline.hgetall(keys.user(n));
      const results = (await call(() => pipeline.exec())) ?? [];
      return names.flatMap((n, i) => toUser(n, (results[i]?.[1] as Record<string, string>) ?? {}) ?? []);
    },
    async addUser(user) {
      const { username, ...fields } = user;
      const added = await write(`the creation of user ${JSON.stringify(username)}`, `${listUsersToCheck}: if it is there, it was created, and creating it again answers already_exists`, () =>
        runDurableScript(client, ADD_USER, [keys.users, keys.user(username)], [keys.channel, username, ...userFields(fields)]),
      );
      return told({ kind: "user", name: username }, added === 1);
    },
    async updateUser(username, patch) {
      const fields = userFields(patch);
      if (fields.length === 0) return (await call(() => client.sismember(keys.users, username))) === 1;
      const updated = await write(`the change to user ${JSON.stringify(username)}`, `${listUsersToCheck}, and a new password shows in whether it logs in: check before sending the change again`, () =>
        runDurableScript(client, UPDATE_USER, [keys.users, keys.user(username)], [keys.channel, username, ...fields]),
      );
      return told({ kind: "user", name: username }, updated === 1);
    },
    async bindRoles(username, names, mustExist) {
      const result = await write(`the role binding of user ${JSON.stringify(username)}`, `${listUsersToCheck}; binding the same roles again is safe`, () =>
        runDurableScript(client, BIND_ROLES, [keys.users, keys.user(username), keys.roles], [keys.channel, username, JSON.stringify(names), ...mustExist]),
      );
      if (typeof result === "string") return { missingRole: result };
      return told({ kind: "user", name: username }, result === 1) ? "bound" : "no-user";
    },
    async removeUser(username) {
      const removed = await write(`the removal of user ${JSON.stringify(username)}`, `${listUsersToCheck}: if it is not there, it was removed`, () =>
        runDurableScript(client, REMOVE_USER, [keys.users, keys.user(username)], [keys.channel, username]),
      );
      return told({ kind: "user", name: username }, removed === 1);
    },
    async chargeAttempt(username, maxFailures, lockUntil, now) {
      const n = await call(() => runDurableScript(client, CHARGE_ATTEMPT, [keys.users, keys.user(username)], [keys.channel, username, maxFailures, lockUntil, now]));
      if (n === 0) return "no-user";
      told({ kind: "user", name: username }, true);
      return n === -1 ? "locked" : Number(n);
    },
    async getRole(name) {
      const json = await call(() => client.hget(keys.roles, name));
      return json === null ? undefined : toRole(name, json);
    },
    async listRoles() {
      const all = await call(() => client.hgetall(keys.roles));
      return Object.entries(all).map(([name, json]) => toRole(name, json));
    },
    async putRole(role) {
      const json = JSON.stringify({ desc: role.desc, bindings: role.bindings });
      const saved = await write(`the save of role ${JSON.stringify(role.name)}`, `read the role (GET /v1/roles/{roleName}, or GetRoleBind); saving the same role again is safe`, () =>
        runDurableScript(client, SET_ROLE, [keys.roles, keys.rolesRemoving], [keys.channel, role.name, json]),
      );
      if (Number(saved) < 0) return "removal-unfinished";
      told({ kind: "role", name: role.name }, true);
      return "saved";
    },
    async removeRole(name) {
      // In parts (see REMOVE_ROLE): the role is gone first, then unbound from the users there are once it is gone.
      // Only the first part's outcome can be unknown to the caller; a later part that fails leaves a removal that the
      // next DELETE of the role finishes ("retry" is then the right advice).
      const removed = await write(`the removal of role ${JSON.stringify(name)}`, `list the roles (GET /v1/roles, or ListRoles); removing it again is safe`, () =>
        runDurableScript(client, REMOVE_ROLE, [keys.roles, keys.rolesRemoving], [keys.channel, name]),
      );
      if (Number(removed) === 0) return false;
      tell({ kind: "role", name }); // this replica's caches at once (the events follow)
      const names = await call(() => client.smembers(keys.users));
      for (let i = 0; i < names.length; i += ROLE_UNBIND_PART) {
        const part = names.slice(i, i + ROLE_UNBIND_PART);
        await call(() => runDurableScript(client, UNBIND_ROLE, part.map(keys.user), [keys.channel, name, ...part]));
        for (const n of part) tell({ kind: "user", name: n });
      }
      await call(() => runDurableScript(client, ROLE_REMOVED, [keys.rolesRemoving], [name]));
      return true;
    },
    async openAudit(entries) {
      if (entries.length === 0) return;
      const fields = entries.flatMap((e) => [e.id, JSON.stringify(e)]);
      // durable per the client's replica policy; without one the plain command (written with the turn's other commands, no pipeline of its own)
      await call(() => (durableWriterOf(client) ? writeDurably(client, keys.auditOpen, (batch) => batch.hset(keys.auditOpen, ...fields)) : client.hset(keys.auditOpen, ...fields)));
    },
    async appendAudit(entries, maxEntries, skipLoggedAmong = 0) {
      if (entries.length === 0) return;
      const args = [maxEntries, skipLoggedAmong, entries.length, ...entries.map((e) => e.id), ...entries.map((e) => JSON.stringify(e))];
      await call(() => runDurableScript(client, APPEND_AUDIT, [keys.audit, keys.auditOpen], args));
    },
    async closeAudit(outcomes, maxEntries) {
      if (outcomes.length === 0) return [];
      const args: (string | number)[] = [maxEntries, OPEN_MARKER, outcomes.length];
      for (const o of outcomes) args.push(o.id);
      for (const o of outcomes) args.push(o.status);
      for (const o of outcomes) args.push(JSON.stringify(o.msg));
      return (await call(() => runDurableScript(client, CLOSE_AUDIT, [keys.audit, keys.auditOpen], args))) as string[];
    },
    async sweepAudit(before, maxEntries) {
      return Number(await call(() => runDurableScript(client, SWEEP_AUDIT, [keys.audit, keys.auditOpen], [before, maxEntries])));
    },
    async *scanAudit(openBefore) {
      // The open entries first, then the log in parts, each one round trip: the event loop is free between them. New
      // entries pushed meanwhile shift the list, so an entry may come twice: ids drop the repeats (an entry that got
      // its outcome while the log was read was reported open already).
      const opened = parseAudit(await call(() => client.hvals(keys.auditOpen))).filter((e) => e.opTime < openBefore);
      const seen = new Set(opened.map((e) => e.id));
      yield newestFirst(opened);
      for (let start = 0; ; start += AUDIT_CHUNK) {
        const list = await call(() => client.lrange(keys.audit, start, start + AUDIT_CHUNK - 1));
        const part: AuditRecord[] = [];
        for (const e of parseAudit(list)) {
          if (seen.has(e.id)) continue;
          seen.add(e.id);
          part.push(e);
        }
        yield part;
        if (list.length < AUDIT_CHUNK) return;
      }
    },
    async readAuditPage(offset, limit, openBefore) {
      const page = runScript(client, READ_AUDIT_PAGE, [keys.audit, keys.auditOpen], [offset, limit, openBefore]);
      const [opened, total, logged] = (await call(() => page)) as [string[], number, string[]];
      const fromOpen = newestFirst(parseAudit(opened)).slice(offset, offset + limit);
      return { entries: [...fromOpen, ...parseAudit(logged)], total: Number(total) };
    },
    async jwtKey(candidate) {
      return String(await call(() => runDurableScript(client, JWT_KEY, [keys.jwtKey], [candidate])));
    },
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      if (closed) return;
      closed = true;
      listeners.clear();
      await feed.close();
      if (!options.hub) await quitQuietly(client);
    },
  };
  return store;
}
