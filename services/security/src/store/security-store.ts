/** A namespace and what a role may do in it: `r`, `w` or `rw`. */
export interface Binding {
  namespace: string;
  action: "r" | "w" | "rw";
}

export interface UserRecord {
  username: string;
  /** scrypt salt and key, base64 (see passwords.ts). */
  salt: string;
  hash: string;
  roles: string[];
  /** Locked by hand: until unlocked. */
  locked: boolean;
  /** Locked by failed logins until this time (epoch ms); 0 = not. */
  lockedUntil: number;
  /** Failed logins in a row since the last success or lockout. */
  failures: number;
  /**
   * The user's session stamp, a random text carried by every token issued to the user (its `ses` claim): a token is
   * valid only while it matches. A new one is drawn when the user is created, its password changed or the super user
   * reset, which ends every session issued before — also a deleted user's, when the name is created again.
   */
  session?: string;
  /** Tokens issued before this time (epoch s) are refused: how releases before the session stamp ended sessions (read only). */
  tokensAfter?: number;
}

export interface RoleRecord {
  name: string;
  desc: string;
  bindings: Binding[];
}

export interface AuditRecord {
  id: string;
  operator: string;
  ip: string;
  resource: string;
  action: string;
  status: number;
  msg: string;
  /** epoch ms */
  opTime: number;
}

/** The outcome of an opened audit entry: what {@link SecurityStore.closeAudit} replaces in it. */
export interface AuditOutcome {
  id: string;
  status: number;
  msg: string;
}

/** What an opened entry says until its call's outcome is recorded (and for ever, if the process died first). */
export const NO_OUTCOME = "no outcome recorded: the call is in progress, or the process serving it stopped before recording it";

/**
 * What {@link SecurityStore.closeAudit} looks for in an open entry's JSON text (fields in AuditRecord's order): the
 * status and message of an open entry, up to the time that follows them. Quotes inside a JSON string are escaped, so
 * only the entry's own fields can match.
 */
export const OPEN_MARKER = `,"status":0,"msg":${JSON.stringify(NO_OUTCOME)},"opTime":`;

/**
 * What changed, so that caches drop it. "all": the change feed was lost (`trusted: false`: do not cache until it is
 * back) or is back (`trusted: true`: anything may have changed meanwhile).
 */
export type SecurityChange = { kind: "user" | "role"; name: string } | { kind: "all"; trusted: boolean };

/** What a bind did: "bound", no such user, or the first role of `mustExist` that is not stored (nothing written). */
export type BindResult = "bound" | "no-user" | { missingRole: string };

export type UserPatch = Partial<Pick<UserRecord, "salt" | "hash" | "roles" | "locked" | "lockedUntil" | "failures" | "session">>;

/**
 * Where users, roles, the audit log and the JWT key live: the system namespace (contract §2) of the embedded store or
 * Redis. Every change is announced to every replica's {@link SecurityStore.onChange}, which is what keeps their caches
 * honest.
 */
export interface SecurityStore {
  readonly kind: "embedded" | "redis" | "redis-cluster";
  getUser(username: string): Promise<UserRecord | undefined>;
  listUsers(): Promise<UserRecord[]>;
  /** false: the user exists (nothing written). */
  addUser(user: UserRecord): Promise<boolean>;
  /** false: no such user (nothing written; a concurrent delete is not undone). */
  updateUser(username: string, patch: UserPatch): Promise<boolean>;
  removeUser(username: string): Promise<boolean>;
  /**
   * Sets the user's roles, atomically with a check that each of `mustExist` is a stored role: a role removed while it
   * was being bound is never left bound (a role created later under its name would grant it again).
   */
  bindRoles(username: string, roles: string[], mustExist: string[]): Promise<BindResult>;
  /**
   * Charges one password attempt to the user before the password is checked, atomically: the attempt's number since
   * the last success or lock (1 … `maxFailures`), or "locked" (nothing counted) when the user is locked at `now` —
   * or becomes so because this attempt is one more than `maxFailures` (then locked until `lockUntil`, the count
   * restarting). Charged before the check, so that parallel attempts cannot all pass a lock that the first failures
   * would set: at most `maxFailures` passwords are tried per lock. "no-user": no such user (nothing written).
   */
  chargeAttempt(username: string, maxFailures: number, lockUntil: number, now: number): Promise<number | "locked" | "no-user">;
  getRole(name: string): Promise<RoleRecord | undefined>;
  listRoles(): Promise<RoleRecord[]>;
  /**
   * Creates or replaces the role. "removal-unfinished" (nothing written): a removal of this name began and has not
   * finished (it is under way, or its process died part way): removing the role again finishes it.
   */
  putRole(role: RoleRecord): Promise<"saved" | "removal-unfinished">;
  /**
   * Removes the role and unbinds it from every user who holds it; true also when it finishes a removal of this name that
   * did not finish. From the moment it begins the role grants nothing and cannot be bound.
   */
  removeRole(name: string): Promise<boolean>;
  /** Stores entries whose calls are under way (no outcome yet), in one store call; they are read with the log. */
  openAudit(entries: AuditRecord[]): Promise<void>;
  /**
   * Appends entries with their outcome (oldest first) in one store call, replacing the open entries of the same ids,
   * keeping the newest `maxEntries`. With `skipLoggedAmong` > 0, an entry whose id is among that many newest entries of
   * the log is not appended again: the retry of a write whose outcome was unknown (it may have been applied).
   */
  appendAudit(entries: AuditRecord[], maxEntries: number, skipLoggedAmong?: number): Promise<void>;
  /**
   * Records the outcomes of opened entries (oldest first) in one store call: each open entry moves into the log with
   * its `status` and `msg` replaced, keeping the newest `maxEntries`. Only the outcome travels, not the entry again.
   * Answers the ids whose open entry was not found as opened (gone, or not opened with {@link NO_OUTCOME}): the caller
   * appends those whole. An entry must be opened with its fields in AuditRecord's order, as {@link openAudit} stores it.
   */
  closeAudit(outcomes: AuditOutcome[], maxEntries: number): Promise<string[]>;
  /** Moves open entries older than `before` (their process died before their outcome) into the log as they are. */
  sweepAudit(before: number, maxEntries: number): Promise<number>;
  /**
   * Every entry kept, newest first, in parts: the open ones started before `openBefore` (by time; younger ones are
   * calls under way) in the first part, then the log. One that gets its outcome while the log is being read is
   * reported open. A filter over the whole log holds a part at a time, not the log ({@link collectAudit}: all of it).
   */
  scanAudit(openBefore: number): AsyncIterable<AuditRecord[]>;
  /** One page of what `scanAudit` reads, and how many entries that is (a query without filters). */
  readAuditPage(offset: number, limit: number, openBefore: number): Promise<{ entries: AuditRecord[]; total: number }>;
  /** The shared JWT key: the stored one, or `candidate` stored now if there is none (first replica wins). */
  jwtKey(candidate: string): Promise<string>;
  /** Listens to changes from every replica; returns the unsubscribe. */
  onChange(listener: (change: SecurityChange) => void): () => void;
  close(): Promise<void>;
}

/** Every part of a scan, in one array. */
export async function collectAudit(parts: AsyncIterable<AuditRecord[]>): Promise<AuditRecord[]> {
  const all: AuditRecord[] = [];
  for await (const part of parts) all.push(...part);
  return all;
}
