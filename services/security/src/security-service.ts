import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { SecurityService } from "@gov/api/gen/gov/security/v1/security_pb";
import { checkNamespace, composedFormOf, invisibleCharacterIn, withInvisibleWrittenOut, type NamespaceRule } from "@gov/service-kit";
import { auditMatcher, csvRecord, CSV_HEADER, csvRow, OPEN_SHOWN_AFTER_MS, type AuditWriter } from "./audit-log.js";
import { hashPassword } from "./passwords.js";
import { ADMIN_ROLE, callerOf } from "./principal.js";
import { checkPassword, isLocked, type SecurityCore } from "./security-core.js";
import type { AuditRecord, Binding, SecurityStore } from "./store/security-store.js";
import { newSession } from "./tokens.js";

/**
 * A user or role name in a message, quoted as JSON (controls escaped) and with every other character that would not
 * show written out: a 404 for "root\u200b" must not read as one for the existing "root".
 */
const quoted = (name: string) => withInvisibleWrittenOut(JSON.stringify(name));
const noSuchUser = (username: string) => new ConnectError(`user ${quoted(username)} does not exist`, Code.NotFound);
const noSuchRole = (roleName: string) => new ConnectError(`role ${quoted(roleName)} does not exist`, Code.NotFound);

export interface SecurityServiceDeps {
  core: SecurityCore;
  store: SecurityStore;
  audit: AuditWriter;
  namespaceRule: NamespaceRule;
  now?: () => number;
}

const invalid = (message: string) => new ConnectError(message, Code.InvalidArgument);
const MAX_NAME = 128;

function checkName(value: string, what: string): void {
  if (value === "") throw invalid(`${what} is empty`);
  if (value.length > MAX_NAME || /[\u0000-\u001f\u007f]/.test(value)) throw invalid(`${what} must be at most ${MAX_NAME} characters without control characters`);
}

/**
 * A new user's or role's name, beyond {@link checkName}: no space at either end (two names that look alike), composed
 * Unicode (NFC), and no character that draws nothing or rearranges what is drawn (zero-width, bidirectional and other format characters, C1
 * controls: see invisible-characters.ts in the service kit), with which a name can show in the user list and the audit log as another. Only for
 * names being created: existing ones keep working.
 */
function checkNewName(value: string, what: string): void {
  checkName(value, what);
  if (value.trim() !== value) throw invalid(`${what} starts or ends with a space: remove it`);
  const hidden = invisibleCharacterIn(value);
  if (hidden) throw invalid(`${what} contains ${hidden}, a character that does not show (invisible, a control or a bidirectional override), which would let it pass for another name: remove it`);
  // Two users "róot" in the user list and the audit log: new names are taken in the composed form (NFC) only, which is
  // how keyboards and most clients send them, so each name that shows one way is one name.
  const composed = composedFormOf(value);
  if (composed !== undefined) {
    throw invalid(`${what} is not in composed Unicode form (NFC): it shows the same as ${JSON.stringify(composed)}, which would be another name; send that`);
  }
}

/**
 * How long a query of the audit log waits for the entries recorded before it to reach the store. Longer only while that
 * store refuses them: the query then reads what the store has (an outage of it answers 503 at once) rather than hold
 * its caller for the whole outage (it hung until a gateway's deadline, 504).
 */
const QUERY_FLUSH_WAIT_MS = 1000;

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 1000;
const ROWS_PER_CHUNK = 500;

/** The handlers of gov.security.v1.SecurityService (contract §7); who may call which is the interceptor's job. */
export function createSecurityService(deps: SecurityServiceDeps): ServiceImpl<typeof SecurityService> {
  const { core, store, audit } = deps;
  const now = deps.now ?? Date.now;
  const superUser = core.superUsername;
  const userOrThrow = async (username: string) => {
    checkName(username, "username");
    const user = await store.getUser(username);
    if (!user) throw noSuchUser(username);
    return user;
  };
  /**
   * The entries that match, newest first, a part at a time: a filter over a log of 100,000 entries holds one part (and
   * what it keeps of it), and gives other requests a turn between parts.
   */
  const filtered = async function* (req: { query: string; from: string; to: string; successful?: boolean }) {
    const match = auditMatcher(req);
    await audit.flushedWithin(QUERY_FLUSH_WAIT_MS); // what was recorded before this query is in it (see there)
    for await (const part of store.scanAudit(Date.now() - OPEN_SHOWN_AFTER_MS)) {
      yield part.filter(match);
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  return {
    async login(req) {
      checkName(req.username, "username");
      return core.login(req.username, req.password);
    },
    async refresh(req) {
      checkName(req.username, "username");
      if (!req.accessToken || !req.refreshToken) throw invalid("send both tokens of the pair: {accessToken, refreshToken}");
      return core.refresh(req.username, req.accessToken, req.refreshToken);
    },
    async listUsers() {
      const t = now();
      const users = await store.listUsers();
      return { users: users.sort((a, b) => a.username.localeCompare(b.username)).map((u) => ({ username: u.username, roles: u.roles, locked: isLocked(u, t) })) };
    },
    async addUser(req) {
      checkNewName(req.username, "username");
      checkPassword(req.password);
      const hashed = await hashPassword(req.password);
      // a fresh session stamp: tokens of an earlier user of this name (deleted since) do not fit it
      const added = await store.addUser({ username: req.username, ...hashed, roles: [], locked: false, lockedUntil: 0, failures: 0, session: newSession() });
      if (!added) throw new ConnectError(`user ${quoted(req.username)} already exists`, Code.AlreadyExists);
      return { added };
    },
    async removeUser(req) {
      checkName(req.username, "username");
      if (req.username === superUser) throw new ConnectError(`the super user ${JSON.stringify(superUser)} cannot be removed`, Code.FailedPrecondition);
      if (!(await store.removeUser(req.username))) throw noSuchUser(req.username);
      return { removed: true };
    },
    async changePassword(req, ctx: HandlerContext) {
      const user = await userOrThrow(req.username);
      checkPassword(req.newPassword, "newPassword");
      const caller = callerOf(ctx);
      // The super user cannot be locked or removed and bypasses RBAC: an administrator who could reset its password
      // could take it over and lock its owner out. Lost, it is reset at startup (gov.super.init).
      if (req.username === superUser && caller && caller.username !== superUser) {
        throw new ConnectError(`only the super user ${JSON.stringify(superUser)} may change its password (a lost one is reset by starting with gov.super.init=true and gov.super.password)`, Code.PermissionDenied);
      }
      // An admin may reset anyone's password; everyone else (and an admin changing their own) proves the old one.
      const needsOld = !caller || !caller.admin || caller.username === req.username;
      if (needsOld && req.oldPassword === "") {
        throw new ConnectError("oldPassword is missing: send the current password with the new one ({oldPassword, newPassword}); only an admin may reset another user's password without it", Code.InvalidArgument);
      }
      // as a login's password: no password is that long, and a megabyte of one was hashed (scrypt's cost grows with
      // it) and counted toward the lockout, where the login refuses it before any work
      if (needsOld) checkPassword(req.oldPassword, "oldPassword");
      // under the login's lockout: a stolen access token must not be a way to guess the password without limit
      if (needsOld && (await core.passwordAttempt(user, req.oldPassword)) !== "right") {
        throw new ConnectError(
          `oldPassword is wrong, or the user is locked after ${core.maxFailures} wrong passwords: send the current password to change it`,
          Code.PermissionDenied,
        );
      }
      // sessions issued before the change end (a stolen token or password stops working)
      const changed = await store.updateUser(req.username, { ...(await hashPassword(req.newPassword)), session: newSession() });
      if (!changed) throw noSuchUser(req.username);
      return { changed };
    },
    async bindRoles(req) {
      await userOrThrow(req.username);
      const names = [...new Set(req.roleNames)];
      for (const name of names) checkName(name, "role name");
      // the built-in admin role is not stored; every other role must be, when the user's roles are written (one step)
      const result = await store.bindRoles(req.username, names, names.filter((n) => n !== ADMIN_ROLE));
      if (result === "no-user") throw noSuchUser(req.username);
      if (result !== "bound") throw new ConnectError(`role ${quoted(result.missingRole)} does not exist: create it first (PUT /v1/roles/{roleName})`, Code.NotFound);
      return { bound: true };
    },
    async lockUser(req) {
      checkName(req.username, "username");
      if (req.username === superUser) throw new ConnectError(`the super user ${JSON.stringify(superUser)} cannot be locked`, Code.FailedPrecondition);
      if (!(await store.updateUser(req.username, { locked: true }))) throw noSuchUser(req.username);
      return { locked: true };
    },
    async unlockUser(req) {
      checkName(req.username, "username");
      if (!(await store.updateUser(req.username, { locked: false, lockedUntil: 0, failures: 0 }))) throw noSuchUser(req.username);
      return { unlocked: true };
    },
    async listRoles() {
      const roles = await store.listRoles();
      return { roles: roles.sort((a, b) => a.name.localeCompare(b.name)).map((r) => ({ name: r.name, desc: r.desc })) };
    },
    async getRoleBindings(req) {
      checkName(req.roleName, "roleName");
      if (req.roleName === ADMIN_ROLE) {
        throw invalid(`"${ADMIN_ROLE}" is the reserved administrator role: it has no bindings of its own, it grants rw on every namespace and the users, roles and audit endpoints; bind it to users with PATCH /v1/users/{username}/role`);
      }
      const role = await store.getRole(req.roleName);
      if (!role) throw noSuchRole(req.roleName);
      return { bindings: role.bindings };
    },
    async putRole(req) {
      checkNewName(req.roleName, "roleName");
      if (req.roleName === ADMIN_ROLE) throw invalid(`"${ADMIN_ROLE}" is the reserved administrator role: it cannot be defined, only bound to users`);
      if (req.desc.length > 1024) throw invalid("desc must be at most 1024 characters");
      if (req.resourceActionBind.length > 1000) throw invalid("a role binds at most 1000 namespaces");
      const bound = new Set<string>();
      const bindings: Binding[] = req.resourceActionBind.map((b) => {
        checkNamespace(b.namespace, deps.namespaceRule);
        if (bound.has(b.namespace)) throw invalid(`namespace ${b.namespace} is bound twice: bind it once, with the action that covers both (r, w or rw)`);
        bound.add(b.namespace);
        if (b.action !== "r" && b.action !== "w" && b.action !== "rw") throw invalid(`action ${JSON.stringify(b.action.slice(0, 16))} of ${b.namespace} is not one of r, w, rw`);
        return { namespace: b.namespace, action: b.action };
      });
      if ((await store.putRole({ name: req.roleName, desc: req.desc, bindings })) === "removal-unfinished") {
        throw new ConnectError(`role ${quoted(req.roleName)} is still being removed (a removal that may have been cut short): remove it again (DELETE /v1/roles/${encodeURIComponent(req.roleName)}), then save it`, Code.FailedPrecondition);
      }
      return { saved: true };
    },
    async deleteRole(req) {
      checkName(req.roleName, "roleName");
      if (req.roleName === ADMIN_ROLE) throw invalid(`"${ADMIN_ROLE}" is the reserved administrator role: it cannot be removed, only unbound from users (PATCH /v1/users/{username}/role)`);
      if (!(await store.removeRole(req.roleName))) throw noSuchRole(req.roleName);
      return { removed: true };
    },
    async queryAuditLog(req) {
      if (req.offset < 0) throw invalid("offset must be 0 or more");
      if (req.limit < 0 || req.limit > MAX_LIMIT) throw invalid(`limit must be from 1 to ${MAX_LIMIT} (0 = ${DEFAULT_LIMIT})`);
      const limit = req.limit || DEFAULT_LIMIT;
      let page: AuditRecord[];
      let total: number;
      if (req.query === "" && req.from === "" && req.to === "" && req.successful === undefined) {
        await audit.flushedWithin(QUERY_FLUSH_WAIT_MS);
        ({ entries: page, total } = await store.readAuditPage(req.offset, limit, Date.now() - OPEN_SHOWN_AFTER_MS)); // no filter: read just the page
      } else {
        page = [];
        total = 0;
        for await (const part of filtered(req)) {
          for (const e of part) if (total++ >= req.offset && page.length < limit) page.push(e);
        }
      }
      return {
        total,
        list: page.map((e) => ({ id: e.id, operator: e.operator, ip: e.ip, resource: e.resource, action: e.action, status: e.status, msg: e.msg, opTime: timestampFromMs(e.opTime) })),
      };
    },
    async *exportAuditLog(req, ctx) {
      if (req.offset < 0) throw invalid("offset must be 0 or more");
      if (req.limit < 0) throw invalid("limit must be 0 (everything) or more");
      // the same entries as the query's pages from `offset` on; any number of them (limit 0: all), sent as they are read
      const encoder = new TextEncoder();
      const header = { body: { contentType: "text/csv; charset=utf-8", data: encoder.encode(csvRow(CSV_HEADER)) }, fileName: `audit-log_${now()}.csv` };
      let skip = req.offset;
      let left = req.limit > 0 ? req.limit : Number.POSITIVE_INFINITY;
      let started = false;
      for await (const part of filtered(req)) {
        // after the first read: a store that cannot be read is refused with its status, not a cut-off download
        if (!started) yield header;
        started = true;
        const rows = part.slice(Math.min(skip, part.length), Math.min(part.length, skip + left));
        skip = Math.max(0, skip - part.length);
        left -= rows.length;
        for (let i = 0; i < rows.length && !ctx.signal.aborted; i += ROWS_PER_CHUNK) {
          yield { body: { data: encoder.encode(rows.slice(i, i + ROWS_PER_CHUNK).map(csvRecord).join("")) } };
        }
        if (left <= 0 || ctx.signal.aborted) break;
      }
      if (!started) yield header;
    },
  };
}
