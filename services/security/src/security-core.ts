import { Code, ConnectError } from "@connectrpc/connect";
import { outageLogFields, type Logger } from "@gov/service-kit";
import { countedRefusal } from "./audit-log.js";
import { DUMMY_HASH, generatePassword, hashPassword, MAX_PASSWORD_BYTES, verifyPassword } from "./passwords.js";
import { principalOf, type Principal } from "./principal.js";
import type { SecurityStore, UserRecord } from "./store/security-store.js";
import { createTokens, generateJwtKey, newSession, TokenRefused, type Tokens } from "./tokens.js";

export interface CoreSettings {
  superUsername: string;
  superPassword?: string;
  enforceInitSuperUser: boolean;
  jwtSecret?: string;
  accessValidity: number;
  refreshValidity: number;
  maxFailures: number;
  lockDuration: number;
}

/**
 * The one answer to every refused login (contract §7): an unknown user, a wrong password and a locked user — whatever
 * password it was sent — are not told apart, so a login tells nobody whether a user exists or whether a password
 * guessed during a lock was right.
 */
export const LOGIN_REFUSED = "wrong username or password, or the user is locked (by an administrator, or for a while after too many failed logins)";
const unauthenticated = (message: string) => new ConnectError(message, Code.Unauthenticated);

/** How often, and how far apart, restoring the token key and the super user after a reconnect is tried. */
const RESTORE_ATTEMPTS = 30;
const RESTORE_PAUSE_MS = 1000;
/**
 * How often a process on Redis checks, besides at every reconnect, that the store still has the token key and the super
 * user: a store emptied without a reconnect (`FLUSHALL`, a restore of an old snapshot) sends no resync, and left root
 * locked out and the replicas signing with different keys until a restart.
 */
const LOSS_CHECK_MS = 10_000;

/** Verified tokens kept (their parse and HMAC are most of an authorization's cost); the map is cleared when full. */
const TOKEN_CACHE_SIZE = 10_000;

/** A verified access token: whose it is, when it expires (epoch ms), when it was issued (epoch s) and its session stamp. */
interface VerifiedToken {
  username: string;
  expiresAt: number;
  issuedAt: number;
  session?: string;
}

/**
 * Whether a token still belongs to its user's current session: the stamps match (a new one is drawn at a password
 * change, and for a user created again under the same name), and it was not issued before the cut-off that releases
 * before the stamp recorded. A stamp, not a time: a token issued in the same second as the change (or by a login whose
 * password check overlapped it) carries the old stamp and is refused.
 */
const inSession = (token: { issuedAt: number; session?: string }, user: UserRecord) =>
  token.session === user.session && token.issuedAt >= (user.tokensAfter ?? 0);

/** The token of an `Authorization: Bearer <token>` header value (any case of "Bearer"), or undefined. */
const bearerToken = (header: string | null): string | undefined => (header === null ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1]);

export function isLocked(user: Pick<UserRecord, "locked" | "lockedUntil">, now: number): boolean {
  return user.locked || user.lockedUntil > now;
}

export function checkPassword(password: string, field = "password"): void {
  if (password === "") throw new ConnectError(`${field} is empty: send a password`, Code.InvalidArgument);
  if (Buffer.byteLength(password) > MAX_PASSWORD_BYTES) throw new ConnectError(`${field} is longer than ${MAX_PASSWORD_BYTES} bytes: choose a shorter one`, Code.InvalidArgument);
}

/**
 * Logins, token refresh and "who is this bearer token": the security service's handlers and the authorization
 * interceptor share one core per process. Principals are cached by username and verified tokens by their text; the
 * store's change events (from every replica) drop what changed, so a lock, delete or role change applies at once.
 */
export async function createSecurityCore(opts: { store: SecurityStore; settings: CoreSettings; logger: Logger; now?: () => number; announce?: (text: string) => void }) {
  const { store, settings, logger } = opts;
  const now = opts.now ?? Date.now;
  let secret = settings.jwtSecret ?? (await store.jwtKey(generateJwtKey()));
  const tokensOf = (key: string): Tokens => createTokens(key, { accessMs: settings.accessValidity, refreshMs: settings.refreshValidity }, now);
  let tokens = tokensOf(secret);
  /** Set by initSuperUser in the process that owns the users: a store that came back empty gets its super user again. */
  let superUserAnnounce: ((text: string) => void) | undefined;
  let superUserRestUrl: string | undefined;
  let closed = false;

  const verified = new Map<string, VerifiedToken>();
  let internal: { header: string; session: string | undefined; renewAt: number } | undefined;
  // The last header that named a cached token, and that token's entry: the hot path's shortcut (cachedPrincipal).
  let lastHeader: string | undefined;
  let lastHit: VerifiedToken | undefined;
  /** username → its principal, or null for "no such user"; lock state checked per use (it expires by itself). */
  const principals = new Map<string, { principal: Principal; user: UserRecord } | null>();
  /**
   * Each user's principal as last read from the store, kept while the store is away (the cache above is then dropped):
   * what the management listener trusts during an outage, when an operator most needs to see the health details.
   */
  const lastKnown = new Map<string, { principal: Principal; session: string | undefined }>();
  let cacheTrusted = true;
  /**
   * Counts change events. A principal is read in two store round trips (the user, then its roles); an event that
   * arrives meanwhile may describe a change those reads missed, so what they found is then used but not cached (else
   * a deleted user's tokens would stay valid until that user changed again).
   */
  let changes = 0;
  const unsubscribe = store.onChange((change) => {
    changes++;
    if (change.kind === "user") {
      principals.delete(change.name);
      // what an outage falls back on must not outlive a delete, a lock or a role change: the next read sets it again
      lastKnown.delete(change.name);
    }
    else {
      principals.clear();
      if (change.kind === "all") cacheTrusted = change.trusted;
      if (change.kind === "all" && change.trusted) void restoreAfterResync();
    }
  });

  /**
   * The change feed is back after an interruption, and the store may have come back empty (a Redis restarted without
   * persistence): the token key is stored again — the one every replica already signs with, so that the sessions of
   * users who still exist stay valid and all replicas agree — or, if another replica stored a different one first,
   * adopted; and the process that owns the users creates the super user again. A no-op when nothing was lost.
   */
  async function restoreAfterResync(): Promise<void> {
    // The subscription can be back before the command connection is: a failed attempt is repeated for a while.
    for (let attempt = 1; ; attempt++) {
      try {
        await restore();
        return;
      } catch (err) {
        if (closed || attempt >= RESTORE_ATTEMPTS) {
          if (!closed) logger.warn(outageLogFields(err), "after the store came back: the token key or the super user could not be restored; the next reconnect retries");
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, RESTORE_PAUSE_MS).unref());
      }
    }
  }

  /**
   * One restore at a time, whoever asks (the resync, the periodic check, a call of the super user that found it
   * missing): a generated super-user password must be made, and printed, once.
   */
  let restoring: Promise<void> | undefined;
  const restore = (): Promise<void> =>
    (restoring ??= restoreOnce().finally(() => {
      restoring = undefined;
    }));

  async function restoreOnce(): Promise<void> {
    if (!settings.jwtSecret) {
      const stored = await store.jwtKey(secret);
      if (stored !== secret) {
        secret = stored;
        tokens = tokensOf(stored);
        verified.clear();
        lastHeader = undefined;
        lastHit = undefined;
        logger.warn("the token key in the store changed while the store was away: sessions signed with the old one must log in again");
      }
    }
    // only if it is missing: enforce-init-super-user resets it at startup, not at every reconnect
    if (superUserAnnounce && !(await store.getUser(settings.superUsername))) {
      logger.error({ username: settings.superUsername }, "the store lost its security data (the super user is gone: a Redis flushed, or restarted without persistence): creating the super user again; other users and roles must be restored from a backup");
      principals.clear();
      await core.initSuperUser(superUserAnnounce, superUserRestUrl);
    }
  }

  // The periodic check (see LOSS_CHECK_MS); the embedded store cannot lose data while its process lives.
  const lossCheck =
    store.kind === "embedded"
      ? undefined
      : setInterval(() => {
          if (cacheTrusted) restore().catch((err) => logger.debug(outageLogFields(err), "checking the store for lost security data failed; the next check retries"));
        }, LOSS_CHECK_MS);
  lossCheck?.unref();


  const loadPrincipal = async (username: string): Promise<{ principal: Principal; user: UserRecord } | null> => {
    const cached = principals.get(username);
    if (cached !== undefined) return cached;
    const changesBefore = changes;
    const user = await store.getUser(username);
    let entry: { principal: Principal; user: UserRecord } | null = null;
    if (user) {
      const roles = await Promise.all(user.roles.map((r) => store.getRole(r)));
      entry = { principal: principalOf(username, username === settings.superUsername, user.roles, roles.flatMap((r) => r?.bindings ?? [])), user };
    }
    if (cacheTrusted && changes === changesBefore) principals.set(username, entry);
    if (entry === null) lastKnown.delete(username);
    else {
      if (lastKnown.size >= TOKEN_CACHE_SIZE) lastKnown.clear();
      lastKnown.set(username, { principal: entry.principal, session: entry.user.session });
    }
    return entry;
  };

  /**
   * The super user, found missing: it cannot be removed, so the store lost its data (a Redis restarted empty), and the
   * process that owns the users creates it again before this answers — a call (a watch's next message) that meets the
   * loss before the resync has restored it is not told that root "no longer exists". Elsewhere: retry shortly.
   */
  const superUserAgain = async () => {
    if (superUserAnnounce) {
      await restore();
      principals.delete(settings.superUsername);
      const entry = await loadPrincipal(settings.superUsername);
      if (entry) return entry;
    }
    throw new ConnectError(`the super user ${JSON.stringify(settings.superUsername)} is missing from the store (it lost its data) and is being created again: retry in a moment`, Code.Unavailable);
  };

  /** The user a still-valid login belongs to, read again: deleted and locked users are refused, and old sessions. */
  const currentUser = async (username: string, token: { issuedAt: number; session?: string }) => {
    const entry = (await loadPrincipal(username)) ?? (username === settings.superUsername ? await superUserAgain() : null);
    if (!entry) throw unauthenticated(`user ${JSON.stringify(username)} no longer exists: log in as another user`);
    if (username !== settings.superUsername && isLocked(entry.user, now())) throw unauthenticated(`user ${JSON.stringify(username)} is locked: ask an administrator to unlock it`);
    if (!inSession(token, entry.user)) throw unauthenticated("this session has ended (the password was changed, or the user removed and created again since this token was issued): log in again");
    return entry;
  };

  const core = {
    /** Issues and verifies tokens with the current key (it changes only if the store came back with another). */
    get tokens(): Tokens {
      return tokens;
    },
    superUsername: settings.superUsername,
    /** gov.security.login.max-failures: wrong passwords that lock a user. */
    maxFailures: settings.maxFailures,

    /**
     * The caller when both its token and its user are cached and valid (the common case, answered without a promise);
     * undefined sends the caller to {@link authenticate}.
     */
    cachedPrincipal(header: string | null): Principal | undefined {
      let hit: VerifiedToken | undefined;
      // A client sends the same header again and again: comparing it with the last one is several times cheaper than
      // testing, slicing and hashing a ~200-character token for the map (~3 µs of a config GET under load, profiled).
      if (header !== null && header === lastHeader) hit = lastHit;
      else {
        if (header === null || header.length < 8 || !/^bearer /i.test(header)) return undefined;
        hit = verified.get(header.slice(7).trim());
        if (hit === undefined) return undefined;
        lastHeader = header; // only a header whose token is cached: lastHit is never undefined for it
        lastHit = hit;
      }
      if (hit === undefined || hit.expiresAt <= now()) return undefined;
      const entry = principals.get(hit.username);
      if (!entry || (entry.principal.superUser === false && isLocked(entry.user, now())) || !inSession(hit, entry.user)) return undefined;
      return entry.principal;
    },

    /**
     * An access token of the super user, for a module's own calls (a worker has no caller to act for), in the super
     * user's current session: issued again when that session changed (a reset) or the token is half way to expiry.
     */
    async internalHeader(): Promise<string> {
      const session = (await loadPrincipal(settings.superUsername))?.user.session;
      if (!internal || internal.renewAt <= now() || internal.session !== session) {
        const { accessToken } = await tokens.issue(settings.superUsername, session);
        internal = { header: `Bearer ${accessToken}`, session, renewAt: now() + settings.accessValidity / 2 };
      }
      return internal.header;
    },

    /**
     * The management listener's view of a caller: admin, user, or nobody. Like {@link authenticate}; but while the store
     * cannot be read, a token whose signature and expiry hold is trusted with the role its user had when last read
     * (a lock or delete that happened during the outage cannot be seen by anyone then). Health details and id
     * operations must stay reachable to the operators who are repairing that very outage.
     */
    async managementRole(header: string | null): Promise<"admin" | "user" | undefined> {
      try {
        const principal = await core.authenticate(header);
        return principal.admin ? "admin" : "user";
      } catch (err) {
        if (err instanceof ConnectError && err.code === Code.Unauthenticated) return undefined;
        const token = bearerToken(header);
        const verifiedToken = token && (await tokens.verify(token, "access").catch(() => undefined));
        const known = verifiedToken ? lastKnown.get(verifiedToken.username) : undefined;
        if (!verifiedToken || !known || known.session !== verifiedToken.session) return undefined;
        return known.principal.admin ? "admin" : "user";
      }
    },

    /** The caller of an `authorization` header value (`Bearer <accessToken>`), or unauthenticated (401). */
    async authenticate(header: string | null): Promise<Principal> {
      if (!header) throw unauthenticated("no access token: log in (POST /v1/authenticate/{username}/login) and send Authorization: Bearer <accessToken>");
      const token = bearerToken(header);
      if (!token) throw unauthenticated("the Authorization header must be \"Bearer <accessToken>\"");
      let hit = verified.get(token);
      if (hit === undefined || hit.expiresAt <= now()) {
        if (hit) verified.delete(token);
        try {
          const v = await tokens.verify(token, "access");
          hit = { username: v.username, expiresAt: v.expiresAt, issuedAt: v.issuedAt, session: v.session };
        } catch (err) {
          throw err instanceof TokenRefused ? unauthenticated(err.message) : err;
        }
        if (verified.size >= TOKEN_CACHE_SIZE) verified.clear();
        verified.set(token, hit);
      }
      return (await currentUser(hit.username, hit)).principal;
    },

    async login(username: string, password: string) {
      checkPassword(password);
      const user = (await store.getUser(username)) ?? (username === settings.superUsername && superUserAnnounce ? (await superUserAgain()).user : undefined);
      if (!user) {
        await verifyPassword(password, DUMMY_HASH); // the same work as for a known user
        throw unauthenticated(LOGIN_REFUSED);
      }
      const attempt = await core.passwordAttempt(user, password);
      if (attempt === "counted") throw countedRefusal(unauthenticated(LOGIN_REFUSED));
      if (attempt !== "right") throw unauthenticated(LOGIN_REFUSED);
      // the session as read before the password check: a change that overlapped the check ends this one too
      return tokens.issue(username, user.session);
    },

    /**
     * Whether `password` is the user's, under the lockout (`gov.security.login.max-failures` wrong passwords lock the
     * user for `gov.security.login.lock-duration`): "right"; "counted", a wrong one counted toward the lock; "refused",
     * a wrong one not counted (the super user cannot be locked) or any password of a locked user — after the same work
     * in every case. The attempt is charged in the store before the (slow) check, so that attempts sent in parallel
     * cannot all be checked before the failures among them lock the user: 32 at once were, the right one last among
     * them answered with tokens.
     */
    async passwordAttempt(user: UserRecord, password: string): Promise<"right" | "counted" | "refused"> {
      if (user.username === settings.superUsername) return (await verifyPassword(password, user)) ? "right" : "refused";
      const charged = await store.chargeAttempt(user.username, settings.maxFailures, now() + settings.lockDuration, now());
      const ok = await verifyPassword(password, user); // a locked user's too: a refusal takes as long either way
      if (typeof charged !== "number") return "refused";
      if (ok) {
        await store.updateUser(user.username, { failures: 0 }); // a right password starts the count again
        return "right";
      }
      if (charged >= settings.maxFailures) await store.updateUser(user.username, { failures: 0, lockedUntil: now() + settings.lockDuration });
      return "counted";
    },

    async refresh(username: string, accessToken: string, refreshToken: string) {
      const verify = async (token: string, use: "access" | "refresh") => {
        try {
          return await tokens.verify(token, use, { ignoreExpiry: use === "access" });
        } catch (err) {
          throw err instanceof TokenRefused ? unauthenticated(err.message) : err;
        }
      };
      const refresh = await verify(refreshToken, "refresh");
      const access = await verify(accessToken, "access");
      if (refresh.aid !== access.jti || refresh.username !== access.username) throw unauthenticated("the refresh token does not belong to this access token: log in again");
      if (access.username !== username) throw unauthenticated(`these tokens belong to another user than ${JSON.stringify(username)}`);
      const { user } = await currentUser(username, refresh);
      return tokens.issue(username, user.session);
    },

    /**
     * Makes sure the super user exists (and resets it when `gov.security.enforce-init-super-user`). A generated
     * password is printed once by `announce`, with how to log in at `restUrl` (the REST API of this process, when it
     * has one on a known port); a password from the settings is never printed.
     */
    async initSuperUser(announce: (text: string) => void, restUrl?: string): Promise<void> {
      superUserAnnounce = announce;
      superUserRestUrl = restUrl;
      const name = settings.superUsername;
      const existing = await store.getUser(name);
      if (existing && !settings.enforceInitSuperUser) {
        // the setting reads as "the password is this", and a login with it failed without a word (it sets the password
        // of a super user being created only)
        if (settings.superPassword) {
          logger.info({ username: name }, "super user exists: gov.super.password was not applied (it sets the password of a new super user only; gov.super.init=true resets it to the setting at startup)");
        }
        return;
      }
      const password = settings.superPassword ?? generatePassword();
      const hashed = await hashPassword(password);
      // A reset ends the super user's sessions (a new stamp). A new super user gets no stamp: it cannot be removed, so
      // it is created again only when the store lost it (a Redis restarted empty), and then the sessions from before
      // the loss stay good, as the restored token key lets them.
      if (existing) {
        await store.updateUser(name, { ...hashed, locked: false, lockedUntil: 0, failures: 0, session: newSession() });
        logger.warn({ username: name }, "super user re-initialized (gov.security.enforce-init-super-user)");
      } else if (!(await store.addUser({ username: name, ...hashed, roles: [], locked: false, lockedUntil: 0, failures: 0 }))) {
        return; // another replica created it at the same time (and printed its password)
      } else {
        logger.info({ username: name }, "super user created");
      }
      if (!settings.superPassword) announce(superUserBanner(name, password, existing ? "reset" : "created", restUrl));
    },

    close() {
      closed = true;
      clearInterval(lossCheck);
      unsubscribe();
    },
  };
  return core;
}

export type SecurityCore = Awaited<ReturnType<typeof createSecurityCore>>;

/**
 * `restUrl`: where this process serves the REST API. Without one (no gateway here, or a port chosen at listen time)
 * the default address stands in, and the reader is told to replace it: a hint that names PORT 8080 while the process
 * listens elsewhere sends the first login to the wrong port.
 */
function superUserBanner(name: string, password: string, done: "created" | "reset", restUrl?: string): string {
  const body = JSON.stringify({ password });
  const url = restUrl ?? "http://localhost:8080";
  return [
    "",
    "=".repeat(72),
    `Super user "${name}" ${done} with the password: ${password}`,
    `It is shown this once. Log in${restUrl ? "" : " (replace the address with yours)"}:`,
    `  TOKEN=$(curl -s -X POST -d '${body}' ${url}/v1/authenticate/${name}/login | jq -r .accessToken)`,
    `  curl -H "Authorization: Bearer $TOKEN" ${url}/v1/users`,
    "Set gov.super.password (GOV_SUPER_PASSWORD) to choose it; gov.super.init=true resets it at startup.",
    "=".repeat(72),
    "",
  ].join("\n");
}
