import { getOption, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence, MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createContextKey, type Interceptor, type StreamRequest, type StreamResponse, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { http } from "@gov/api";
import { checkNamespace, nothingWritten, outageError, restStatusOf, withInvisibleWrittenOut, type NamespaceRule } from "@gov/service-kit";
import { Access, access } from "@gov/api/gen/gov/security/v1/access_pb";
import type { IdSource } from "./ids.js";
import { isCountedRefusal, NO_OUTCOME, type AuditWriter } from "./audit-log.js";
import { mayAccess, principalKey, type Principal } from "./principal.js";
import type { AuditSelection } from "./settings.js";
import type { AuditRecord } from "./store/security-store.js";

/** What the interceptors decide per method, worked out once from its descriptor. */
interface MethodRule {
  access: Access;
  read: boolean;
  /**
   * Where the request's namespace is: its `namespace` field, or one level down (a keepalive's `register.namespace`);
   * undefined: the request has none (then the RPC is admin-only unless `access` says otherwise).
   */
  namespacePath: string[] | undefined;
  /** REST method and path template of its http rule (the audit log's action and resource). */
  httpMethod: string;
  template: string;
  /** The template cut at its variables: literal, field local name, literal, … (built once). */
  parts: string[];
  /**
   * The scalar fields a REST client sends in the query string (neither in the path nor in the body), so that the
   * resource of a `DELETE /v1/namespaces/{dev}?force=true` says it was forced. Only values that were given.
   */
  query: { local: string; json: string; optional: boolean }[];
}

const isNamespaceField = (f: DescField) => f.name === "namespace" && f.fieldKind === "scalar";

function namespacePathOf(input: DescMessage): string[] | undefined {
  if (input.fields.some(isNamespaceField)) return ["namespace"];
  for (const f of input.fields) {
    if (f.fieldKind === "message" && f.message.fields.some(isNamespaceField)) return [f.localName, "namespace"];
  }
  return undefined;
}

function namespaceOf(rule: MethodRule, message: unknown): unknown {
  let value = message;
  for (const key of rule.namespacePath!) value = (value as Record<string, unknown> | undefined)?.[key];
  return value;
}

/**
 * The services every gRPC listener serves beside ours (contract §8), open to anyone: Kubernetes gRPC probes and load
 * balancers call Health without a token, and reflection describes what `/openapi.json` already publishes. Both only
 * read, so the default audit selection (`write`) leaves them out.
 */
const INFRASTRUCTURE = new Set(["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]);

const rules = new Map<DescMethod, MethodRule>();
export function ruleOf(method: DescMethod): MethodRule {
  let rule = rules.get(method);
  if (!rule) {
    const httpRule = getOption(method, http);
    const pattern = httpRule?.pattern;
    const hasTemplate = pattern && pattern.case !== undefined && pattern.case !== "custom";
    const template = hasTemplate ? (pattern.value as string) : `/${method.parent.typeName}/${method.name}`;
    const infrastructure = INFRASTRUCTURE.has(method.parent.typeName);
    // literal, field name, literal, …: the template cut at its variables
    const cut = template.split(/\{([a-z_][a-z0-9_]*)\}/);
    const inPath = new Set(cut.filter((_, i) => i % 2 === 1));
    const query = hasTemplate && httpRule.body !== "*"
      ? method.input.fields.filter((f) => (f.fieldKind === "scalar" || f.fieldKind === "enum") && !inPath.has(f.name) && f.name !== httpRule.body)
      : [];
    rule = {
      access: infrastructure ? Access.PUBLIC : getOption(method, access),
      read: infrastructure || method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS,
      namespacePath: namespacePathOf(method.input),
      httpMethod: hasTemplate ? pattern.case!.toUpperCase() : "POST",
      template,
      parts: cut.map((part, i) => (i % 2 === 1 ? (method.input.fields.find((f) => f.name === part)?.localName ?? part) : part)),
      query: query.map((f) => ({ local: f.localName, json: f.jsonName, optional: f.fieldKind !== "list" && f.presence === FeatureSet_FieldPresence.EXPLICIT })),
    };
    rules.set(method, rule);
  }
  return rule;
}

/** Path characters that would end or split a segment; everything else stays readable (`{dev}` stays `{dev}`). */
const SEGMENT_BREAKERS = /[%/?#\s\u0000-\u001f\u007f]/g;

/** The REST path of a call: its rule's template with the request's values (for an RPC without a rule, its RPC path). */
export function resourceOf(rule: MethodRule, message: unknown): string {
  const { parts } = rule;
  if (message === undefined) return rule.template;
  const fields = message as Record<string, unknown>;
  let out = parts[0];
  for (let i = 1; i < parts.length; i += 2) {
    const value = fields[parts[i]];
    const text = value === undefined ? `{${parts[i]}}` : String(value);
    SEGMENT_BREAKERS.lastIndex = 0;
    out += (SEGMENT_BREAKERS.test(text) ? text.replace(SEGMENT_BREAKERS, encodeURIComponent) : text) + parts[i + 1];
  }
  for (const { local, json, optional } of rule.query) {
    const value = fields[local];
    // proto3 defaults (false, 0, "") are what an absent query parameter means, unless the field tracks presence
    if (value === undefined || (!optional && (value === false || value === 0 || value === 0n || value === ""))) continue;
    out += `${out.includes("?") ? "&" : "?"}${json}=${encodeURIComponent(String(value))}`;
  }
  return out;
}

const denied = (message: string) => new ConnectError(message, Code.PermissionDenied);

/**
 * Refuses `message` unless `principal` may do what `rule` needs with it. `bound`: a later message of a stream whose
 * first one was authorized, which may leave the namespace out (a keepalive's pings).
 */
function authorize(rule: MethodRule, principal: Principal, message: unknown, namespaceRule: NamespaceRule, bound = false): void {
  switch (rule.access) {
    case Access.PUBLIC:
    case Access.AUTHENTICATED:
      return;
    case Access.SELF_OR_ADMIN:
      if (principal.admin || (message as { username?: unknown }).username === principal.username) return;
      throw denied("only the user themself or an administrator may do this");
    case Access.ADMIN:
      if (principal.admin) return;
      throw denied(`this needs the "admin" role: ask an administrator`);
    default: {
      if (!rule.namespacePath) {
        if (principal.admin) return;
        throw denied(`this needs the "admin" role: ask an administrator`);
      }
      const namespace = namespaceOf(rule, message);
      if (namespace === undefined || namespace === "") {
        if (bound) return;
        // nothing to decide on: the caller's mistake, not a refusal (a keepalive that pings before registering); a
        // plain request gets the namespace rule's own message, as without security
        if (rule.namespacePath!.length === 1) checkNamespace("", namespaceRule);
        throw new ConnectError(`the request names no namespace: set it (${rule.namespacePath!.join(".")}, in the stream's first message)`, Code.InvalidArgument);
      }
      const need = rule.read ? "r" : "w";
      if (typeof namespace === "string" && mayAccess(principal, namespace, need)) return;
      // A name no role can bind (`dev` without its hash tag) is the caller's mistake: the rule's 400, as an admin gets,
      // not a 403 that sends them to an administrator who cannot grant it either.
      if (typeof namespace === "string") checkNamespace(namespace, namespaceRule);
      throw denied(`user ${JSON.stringify(principal.username)} has no "${need}" permission on namespace ${JSON.stringify(String(namespace).slice(0, 256))}: ask an administrator to bind a role that grants it`);
    }
  }
}

/** Checks every message of a request stream (a keepalive's, an import's) as it arrives; `first` keeps the first one. */
async function* authorizedStream(rule: MethodRule, principal: Principal, messages: AsyncIterable<unknown>, first: { message?: unknown }, namespaceRule: NamespaceRule): AsyncIterable<unknown> {
  let bound = false;
  for await (const m of messages) {
    authorize(rule, principal, m, namespaceRule, bound);
    if (!bound) first.message = m;
    bound = true;
    yield m;
  }
}

/**
 * A response stream (a watch) sends each message only while its caller may still have it: the token is checked again
 * before every message — its expiry, and the user's lock, delete, session and roles, from the same caches as a call's
 * first check — against the stream's first request (its namespace). A caller who may no longer read it gets the error
 * instead of the message, and the stream ends: a watch opened once must not go on leaking what its user lost.
 */
async function* stillAuthorized(rule: MethodRule, auth: Authenticator, header: string | null, first: { message?: unknown }, messages: AsyncIterable<unknown>, namespaceRule: NamespaceRule): AsyncIterable<unknown> {
  for await (const m of messages) {
    authorize(rule, auth.cachedPrincipal(header) ?? (await auth.authenticate(header)), first.message, namespaceRule, true);
    yield m;
  }
}

export interface Authenticator {
  /** Synchronous answer from the caches, or undefined. */
  cachedPrincipal(header: string | null): Principal | undefined;
  authenticate(header: string | null): Promise<Principal>;
}

/**
 * The one authorization interceptor (contract §7), installed by the process runner in front of every service on every
 * transport: the bearer token from `authorization`, read or write from the RPC's idempotency level, the namespace
 * from the request's `namespace` field, and the `gov.security.v1.access` method option for everything else. The
 * caller is then in the handler's context (`callerOf(ctx)`).
 */
export function authorizationInterceptor(auth: Authenticator, namespaceRule: NamespaceRule): Interceptor {
  return (next) => (req) => {
    const rule = ruleOf(req.method);
    if (rule.access === Access.PUBLIC) return next(req);
    const header = req.header.get("authorization");
    const pass = (principal: Principal) => {
      req.contextValues.set(principalKey, principal);
      if (!req.stream) {
        authorize(rule, principal, req.message, namespaceRule);
        return next(req);
      }
      const first: { message?: unknown } = {};
      return next({ ...req, message: authorizedStream(rule, principal, req.message, first, namespaceRule) as typeof req.message }).then((res) =>
        res.stream ? { ...res, message: stillAuthorized(rule, auth, header, first, res.message, namespaceRule) as typeof res.message } : res,
      );
    };
    // The hot path (token and user cached) costs no promise of its own.
    const cached = auth.cachedPrincipal(header);
    if (cached) {
      try {
        return pass(cached);
      } catch (err) {
        return Promise.reject(err);
      }
    }
    // A write whose caller cannot be checked (the store is down) never reached its handler: it says so, as a store
    // that refuses a write before sending it does.
    return auth.authenticate(header).then(pass, (err: unknown) => Promise.reject(rule.read ? err : nothingWritten(err)));
  };
}

/**
 * The client of a call: the first address of its `x-forwarded-for` chain (computed by the listener from the trusted
 * proxies), or "" without one. Plain string search: the `?.split(",")[0]?.trim()` chain it replaces was, by itself, the
 * largest line of a profiled audited PUT (~3 µs a call).
 */
function clientOf(chain: string | null): string {
  if (!chain) return "";
  const comma = chain.indexOf(",");
  return (comma < 0 ? chain : chain.slice(0, comma)).trim();
}

/** Entries hold what clients sent (a refused call's names too): capped, so that the log's size stays bounded. */
const cap = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max)}…`);

const selects = (selection: AuditSelection, read: boolean) => selection === "rw" || (read ? selection === "read" : selection === "write");

/** The audit entry of the call under way, shared by the two audit interceptors through the call's context values. */
interface AuditCall {
  /** The entry without operator and outcome (worked out when the call starts). */
  readonly base: Omit<AuditRecord, "operator" | "status" | "msg">;
  /** Resolves true once the entry is opened in the store (the inner interceptor saw the call get past authorization). */
  opened?: Promise<boolean>;
  /**
   * Set when the audit store was failing and the open of the entry, awaited before the handler, was refused: the call
   * was answered {@link auditDown} without running.
   */
  notRun?: ConnectError;
}
const auditCallKey = createContextKey<AuditCall | undefined>(undefined);

/**
 * Who the entry is for: the caller, or for a login (no principal yet) the user it is for — as sent by anyone, so the
 * characters in it that do not show are written out (`\u202e`, `\u200b`; see invisible-characters.ts in the service kit): new user names cannot
 * hold them, and an entry must not show a failed login as another user's.
 */
function operatorOf(req: UnaryRequest | StreamRequest, rule: MethodRule, first: unknown): string {
  const principal = req.contextValues.get(principalKey);
  if (principal) return cap(principal.username, 256);
  if (rule.access !== Access.PUBLIC) return "";
  return cap(withInvisibleWrittenOut(String((first as { username?: unknown } | undefined)?.username ?? "")), 256);
}

/**
 * Records the calls `gov.security.audit-log.action` selects, refused ones included (it runs outside the authorization
 * interceptor). A call that gets past authorization has its entry opened by {@link auditOpenInterceptor} while the
 * handler runs, so the entry is in the store before the answer leaves (no round trip of its own: the store write and
 * the handler overlap) and its outcome follows in a batch after the answer. A refused call's answer waits for its
 * one entry write. On the embedded store, which dies with this process, there is nothing to open: every entry is
 * written once, whole, with its outcome (see `createAuditWriter`).
 *
 * Fail closed (as Vault treats its audit devices): no call is answered successfully unless its entry is stored. An
 * entry whose open was refused is written whole before the answer; if that is not stored within the writer's wait
 * either, the entry lives only in this process's memory (kept and retried, but a SIGKILL loses it), so the call is
 * answered `unavailable` ({@link notRecorded}) instead of its handler's answer, whether the handler succeeded or not.
 * Refused calls (401, 403) acknowledge nothing and keep their answer after the wait.
 */
export function auditInterceptor(opts: { selection: AuditSelection; writer: AuditWriter; ids: IdSource; now?: () => number }): Interceptor {
  const now = opts.now ?? Date.now;
  // a summary is written whole (no entry of its own was opened), kept and retried like every outcome
  const refusals = anonymousRefusals((entry) => void opts.writer.record({ id: opts.ids.nextId(), ...entry }, false, false)?.catch(() => undefined), now);
  return (next) => (req) => {
    const rule = ruleOf(req.method);
    if (!selects(opts.selection, rule.read)) return next(req); // no promise of its own for unrecorded calls
    return recorded(next, req, rule);
  };
  async function recorded<R extends UnaryRequest | StreamRequest>(next: (req: R) => Promise<UnaryResponse | StreamResponse>, req: R, rule: MethodRule) {
    let first: unknown = req.stream ? undefined : req.message;
    const request = req.stream
      ? {
          ...req,
          message: (async function* (messages: AsyncIterable<unknown>) {
            for await (const m of messages) {
              first ??= m;
              yield m;
            }
          })(req.message),
        }
      : req;
    const ip = clientOf(req.header.get("x-forwarded-for"));
    const call: AuditCall = {
      base: { id: opts.ids.nextId(), ip: cap(ip, 64), resource: cap(resourceOf(rule, first), 2048), action: rule.httpMethod, opTime: now() },
    };
    if (opts.writer.opensEntries) req.contextValues.set(auditCallKey, call); // for auditOpenInterceptor
    /** Records a failed call; what to answer (the error, or the one that says its entry is not stored). */
    const failed = async (err: unknown): Promise<unknown> => {
      if (call.notRun && err === call.notRun) {
        // refused before its handler ran, because the audit store is failing: the entry (this answer) cannot be stored
        // now, and waiting for it would only hold an answer that acknowledges nothing; it is kept and retried (sent
        // whole: its open was refused), and only a full queue holds the answer, as for every outcome
        const full = opts.writer.record(entryOf(call, req, rule, first, restStatusOf(call.notRun), call.notRun.rawMessage), false, false);
        if (full) await full;
        return err;
      }
      // what the client is answered: an outage met by the authorization check (inside this interceptor, outside the
      // error interceptor) is a 503, not the 500 ConnectError.from would make of it
      const e = outageError(err) ?? ConnectError.from(err);
      const status = restStatusOf(e);
      // refused with no caller: under the budget (counted into a summary when over it), unless the lockout bounds it
      if (!req.contextValues.get(principalKey) && !isCountedRefusal(err) && !refusals.take(call.base.ip, () => entryOf(call, req, rule, first, status, e.rawMessage))) return err;
      const wait = recordOutcome(opts.writer, call, call.opened && (await call.opened), req, rule, first, status, e.rawMessage, e);
      return (wait && (await wait)) || err;
    };
    /** Records a call that succeeded; undefined, or the error to answer instead (its entry is not stored). */
    const succeeded = async (): Promise<ConnectError | undefined> => {
      const wait = recordOutcome(opts.writer, call, call.opened && (await call.opened), req, rule, first, 200, "");
      return (wait && (await wait)) || undefined;
    };
    /** Opens a stream's entry before it starts; the error to answer instead when the store did not take it. */
    const openStreamEntry = async (): Promise<ConnectError | undefined> => {
      if (!opts.writer.opensEntries) return undefined; // the embedded store: written whole with the outcome
      const entry = entryOf(call, req, rule, first, 0, NO_OUTCOME); // in AuditRecord's field order (see auditOpenInterceptor)
      call.opened = opts.writer.open(entry);
      if (await call.opened) return undefined;
      const answer = notRecorded(opts.writer, req, rule, undefined);
      // kept and retried, sent whole, as the entry of a unary call refused for the same reason
      void opts.writer.record({ ...entry, status: restStatusOf(answer), msg: cap(answer.rawMessage, 1024) }, false, false)?.catch(() => undefined);
      return answer;
    };
    let res;
    try {
      res = await next(request as R);
    } catch (err) {
      throw await failed(err);
    }
    // A stream that reads its requests as they come (a keepalive) is authorized by its first request message, after
    // it has started: its entry is opened now (fail closed: it does not start unless that is stored), and its outcome
    // follows at its first answer, or its failure.
    if (res.stream && req.method.methodKind !== "server_streaming") {
      const refused = await openStreamEntry();
      if (refused) throw refused;
      return { ...res, message: outcomeAtFirst(res.message, succeeded, failed) as typeof res.message };
    }
    const failure = await succeeded();
    if (failure) throw failure;
    return res;
  }
}

/** Passes `messages` on, once `succeeded` (at the first message, or the end) or `failed` (an error before it) has recorded the outcome. */
async function* outcomeAtFirst(
  messages: AsyncIterable<unknown>,
  succeeded: () => Promise<ConnectError | undefined>,
  failed: (err: unknown) => Promise<unknown>,
): AsyncIterable<unknown> {
  const it = messages[Symbol.asyncIterator]();
  let next: IteratorResult<unknown>;
  try {
    next = await it.next();
  } catch (err) {
    throw await failed(err);
  }
  const failure = await succeeded();
  if (failure) {
    await it.return?.();
    throw failure;
  }
  try {
    for (; !next.done; next = await it.next()) yield next.value;
  } finally {
    if (!next.done) await it.return?.();
  }
}

/**
 * How many refused calls without a caller (no valid token, a failed or malformed login) are recorded one by one a
 * second: per client address, and from all addresses together. They are recorded (contract §7), but a client with no
 * account must not be able to push every other entry out of the log's retention (gov.security.audit-log.max-entries)
 * by sending them fast: unbounded, 64 connections did it to 100,000 entries in 9 s, and malformed logins at 8,000 a
 * second. The rest are counted, and each second that left some out is summed up in one entry of its own: which
 * addresses, how many, what they called (login attempts first, so that a password guesser cannot hide behind a flood
 * of token-less calls). Nothing is unaccounted for, and at most 51 entries a second are written. Wrong passwords
 * counted toward a user's lock are always recorded one by one: the lockout bounds them.
 */
const ANONYMOUS_REFUSALS = { perAddress: 5, overall: 50, namedInSummary: 5, addressesCounted: 10_000 };

/** The budget of {@link ANONYMOUS_REFUSALS}, per second of the clock, and the summaries of what was over it. */
function anonymousRefusals(writeSummary: (entry: Omit<AuditRecord, "id">) => void, now: () => number) {
  let second = -1;
  let overall = 0;
  const used = new Map<string, number>();
  /** Left out since the last summary, per address: how many, and the last one's entry. */
  let skipped = new Map<string, { count: number; last: AuditRecord }>();
  let uncounted = 0; // left out from addresses beyond ANONYMOUS_REFUSALS.addressesCounted
  let summary: NodeJS.Timeout | undefined;
  const sumUp = () => {
    summary = undefined;
    const all = [...skipped.entries()];
    const others = uncounted;
    skipped = new Map();
    uncounted = 0;
    if (all.length === 0) return;
    all.sort(([, a], [, b]) => Number(b.last.operator !== "") - Number(a.last.operator !== "") || b.count - a.count);
    const total = all.reduce((n, [, s]) => n + s.count, others);
    const named = all.slice(0, ANONYMOUS_REFUSALS.namedInSummary).map(([ip, { count, last }]) => {
      const as = last.operator ? ` for ${JSON.stringify(last.operator)}` : "";
      return `${ip || "(no address)"} ×${count} (the last: ${last.action} ${last.resource}${as}, ${last.status})`;
    });
    const rest = all.length - named.length;
    const top = all[0][1].last;
    writeSummary({
      operator: top.operator,
      ip: top.ip,
      resource: top.resource,
      action: top.action,
      status: top.status,
      msg:
        `${total} refused call(s) without a caller were not recorded one by one (over ${ANONYMOUS_REFUSALS.perAddress} a second from one ` +
        `address, or ${ANONYMOUS_REFUSALS.overall} from all): ${named.join("; ")}${rest > 0 ? `; and ${rest} more address(es)` : ""}`,
      opTime: now(),
    });
  };
  return {
    /** Whether to record this refusal one by one; if not, it is counted into the next summary (written a second on). */
    take(ip: string, entry: () => AuditRecord): boolean {
      const s = Math.floor(now() / 1000);
      if (s !== second) {
        second = s;
        overall = 0;
        used.clear();
      }
      const n = used.get(ip) ?? 0;
      if (n < ANONYMOUS_REFUSALS.perAddress && overall < ANONYMOUS_REFUSALS.overall) {
        used.set(ip, n + 1);
        overall++;
        return true;
      }
      const left = skipped.get(ip);
      if (left) {
        left.count++;
        left.last = entry();
      } else if (skipped.size < ANONYMOUS_REFUSALS.addressesCounted) skipped.set(ip, { count: 1, last: entry() });
      else uncounted++;
      summary ??= setTimeout(sumUp, 1000).unref();
      return false;
    },
  };
}

/** The entry of a call with its outcome. */
function entryOf(call: AuditCall, req: UnaryRequest | StreamRequest, rule: MethodRule, first: unknown, status: number, msg: string): AuditRecord {
  const b = call.base;
  const resource = req.stream ? cap(resourceOf(rule, first), 2048) : b.resource;
  // Literals, not `{ ...call.base, … }`: spreading here cost several µs per call under load (line profile).
  return { id: b.id, operator: operatorOf(req, rule, first), ip: b.ip, resource, action: b.action, status, msg: cap(msg, 1024), opTime: b.opTime };
}

/** What the audit log's store said when it refused, for an answer (its own "retry" advice left out: the answer gives it). */
const refusalOf = (writer: AuditWriter) => writer.refusal || "its store did not take the entry in time";

/**
 * The answer to a call refused before its handler ran because the audit store is failing (see
 * {@link auditOpenInterceptor}): nothing was done, so retrying is safe.
 */
const auditDown = (writer: AuditWriter) =>
  new ConnectError(`the audit log cannot be written (${refusalOf(writer)}): nothing was done; retry when the store is back`, Code.Unavailable);

/**
 * The answer to a call whose handler ran (or whose stream was about to start) but whose entry could not be stored before
 * the answer (fail closed, see {@link auditInterceptor}). What to do depends on what was done: a write that succeeded
 * was applied, and a caller told only "unavailable" would retry it (twice applied) or believe it failed; a read, a
 * failed call or a stream not started changed nothing the caller relies on, so a retry is the remedy.
 */
function notRecorded(writer: AuditWriter, req: UnaryRequest | StreamRequest, rule: MethodRule, failed: ConnectError | undefined): ConnectError {
  const why = refusalOf(writer);
  let message: string;
  if (req.stream) message = `the audit log could not record this call (${why}): the stream was not started; retry when the store is back`;
  else if (failed) message = `the audit log could not record this call (${why}), which failed anyway (${cap(failed.rawMessage, 512)}): retry when the store is back`;
  else if (rule.read) message = `the audit log could not record this call (${why}): retry when the store is back`;
  else {
    message =
      `the change WAS applied, but the audit log could not record it (${why}): this process keeps the entry and writes it once the ` +
      `store is back. Do not assume the change failed: read it back before sending it again`;
  }
  return new ConnectError(message, Code.Unavailable);
}

/**
 * Records the entry with its outcome: after the answer when it was opened (nothing to wait for, unless the writer's
 * queue is full); else before it, returning a promise of its write (a refused call's, a stream's, or one whose open the
 * store refused). That promise resolves to the error to answer instead when the call must not be answered as its
 * handler did because its entry is not stored ({@link notRecorded}); the entry then records that answer (status 503
 * and its message) in place of the handler's — unless its write was already under way when the wait ended and then
 * succeeds (it keeps the handler's outcome).
 */
function recordOutcome(
  writer: AuditWriter,
  call: AuditCall,
  opened: boolean | undefined,
  req: UnaryRequest | StreamRequest,
  rule: MethodRule,
  first: unknown,
  status: number,
  msg: string,
  failed?: ConnectError,
): Promise<ConnectError | undefined | void> | undefined {
  const entry = entryOf(call, req, rule, first, status, msg);
  // the common case, kept free of promises of its own: the entry was opened, its outcome goes in a later batch
  if (opened) return writer.record(entry);
  const stored = writer.record(entry, true);
  // undefined: the embedded store, which stored it before record() returned
  return stored?.then((ok) => {
    // A call refused before it was opened (401, 403 by authorization, or an outage it met there) acknowledges nothing:
    // it keeps its answer after the wait, as it always did. Everything else whose entry is not stored fails closed —
    // an opened call whose open was refused, and a stream (never opened: its first message, which names the resource,
    // comes later; its handler has not run yet). A write whose outcome is unknown (504: a store reply lost) keeps its
    // answer too: "unavailable, which failed anyway" would tell its caller it failed, and it may have been applied.
    if (ok || (failed && (call.opened === undefined || (failed.code === Code.DeadlineExceeded && !rule.read)))) return undefined;
    const answer = notRecorded(writer, req, rule, failed);
    entry.status = restStatusOf(answer);
    entry.msg = cap(answer.rawMessage, 1024);
    return answer;
  });
}

/**
 * The inner half of the audit log, installed after the authorization interceptor: opens the entry of a call that got
 * past authorization (so its operator is known) while the handler runs. Streams are left to the outer half: their
 * first message, which names the resource, arrives later. Installed only when the writer opens entries (not embedded).
 *
 * While the audit store is failing (its last open batch was refused), the handler does not run alongside the open:
 * it would very likely do its work and then be answered "not recorded" (see {@link notRecorded}), a change applied
 * with no entry in the log. The open is awaited first instead, and if the store refuses it too the call is answered
 * {@link auditDown} without running. This costs one round trip per call, only during the outage; the first open
 * stored clears the state and calls overlap their open again.
 */
export function auditOpenInterceptor(writer: AuditWriter): Interceptor {
  return (next) => (req) => {
    const call = req.stream ? undefined : req.contextValues.get(auditCallKey);
    // A call without a caller (a login) is recorded once, whole, with its outcome: opened first, a refused one would
    // stay in the log, open, when it is left out of it (the budget of anonymous refusals) — and it would cost
    // the budget nothing to send them by the thousand.
    if (!call || !req.contextValues.get(principalKey)) return next(req);
    const b = call.base;
    const operator = operatorOf(req, ruleOf(req.method), req.message);
    const failing = writer.failing; // read before the open: its batch's outcome sets it for the calls after it
    // in AuditRecord's field order: the store finds where the outcome goes by it (closeAudit)
    call.opened = writer.open({ id: b.id, operator, ip: b.ip, resource: b.resource, action: b.action, status: 0, msg: NO_OUTCOME, opTime: b.opTime });
    if (!failing) return next(req);
    return call.opened.then((stored) => {
      if (stored) return next(req);
      call.notRun = auditDown(writer);
      throw call.notRun;
    });
  };
}
