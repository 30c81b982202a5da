import type { HandlerContext } from "@connectrpc/connect";
import { defineScript, prepareScripts, redisCaller, runScript, type RedisClient } from "@gov/redis";
import { callerOf, mayAccess } from "@gov/security-service";
import { isValidNamespace, type NamespaceRule } from "@gov/service-kit";
import { serviceKeys } from "./store/redis-registry-scripts.js";
import { checkServiceId } from "./validation.js";

/**
 * The service dependency topology (contract §6): an edge `consumer → producer` with the time it was last seen, kept in
 * the consumer's namespace. A producer in the consumer's own namespace is written as its service id, one in another
 * namespace as `{ns}.{serviceId}`. Edges not seen for `gov.topology.edge-ttl` are not listed and the stats worker
 * prunes them.
 */
export interface TopologyEdge {
  consumer: string;
  producer: string;
  /** Epoch ms of the last discovery call that recorded it. */
  lastSeen: number;
}

export interface TopologyStore {
  /**
   * Records that `consumer` discovered `producer` at `now`; resolves false when nothing was recorded because `consumer`
   * is not a service of `namespace` (only registered services identify themselves). A namespace keeps at most
   * `MAX_EDGES_PER_NAMESPACE` edges: the least recently seen go first.
   */
  touch(namespace: string, consumer: string, producer: string, now: number): Promise<boolean>;
  /** The edges of `namespace` seen after `since`, in no particular order. */
  edges(namespace: string, since: number): Promise<TopologyEdge[]>;
  /** Drops the edges of `namespace` last seen at or before `before`; returns how many. */
  prune(namespace: string, before: number): Promise<number>;
  /** Nothing of its own to release (it uses the registry's Redis client); for `ModuleContext.shared`. */
  close(): Promise<void>;
}

/** Bounds a namespace's topology whatever callers claim to be (edges age out too, but only after a day). */
export const MAX_EDGES_PER_NAMESPACE = 10_000;

const member = (consumer: string, producer: string) => JSON.stringify([consumer, producer]);

/** The embedded topology; `isService` says whether a consumer is a service of the namespace. */
export function createMemoryTopologyStore(isService: (namespace: string, serviceId: string) => Promise<boolean>): TopologyStore {
  const byNamespace = new Map<string, Map<string, TopologyEdge>>();
  return {
    async touch(ns, consumer, producer, now) {
      if (!(await isService(ns, consumer))) return false;
      let edges = byNamespace.get(ns);
      if (!edges) byNamespace.set(ns, (edges = new Map()));
      const key = member(consumer, producer);
      edges.delete(key); // re-inserted last: the map stays in last-seen order
      edges.set(key, { consumer, producer, lastSeen: now });
      if (edges.size > MAX_EDGES_PER_NAMESPACE) edges.delete(edges.keys().next().value!);
      return true;
    },
    async edges(ns, since) {
      return [...(byNamespace.get(ns)?.values() ?? [])].filter((e) => e.lastSeen > since);
    },
    async prune(ns, before) {
      const edges = byNamespace.get(ns);
      let n = 0;
      for (const [key, e] of edges ?? []) {
        if (e.lastSeen <= before) {
          edges!.delete(key);
          n++;
        }
      }
      return n;
    },
    close: async () => byNamespace.clear(),
  };
}

/** KEYS: the namespace's service index, its topology zset. ARGV: consumer, member, now, max edges. */
const TOUCH = defineScript(
  "gov-topology-touch",
  2,
  `
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
local extra = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if extra > 0 then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, extra - 1) end
return 1
`,
);

/** The topology on Redis: one sorted set per namespace (`{ns}:topology`, member `["consumer","producer"]`, score last seen). */
export function createRedisTopologyStore(client: RedisClient): TopologyStore {
  const call = redisCaller(client);
  prepareScripts(client, TOUCH);
  const key = (ns: string) => `${ns}:topology`;
  return {
    async touch(ns, consumer, producer, now) {
      return (await call(() => runScript(client, TOUCH, [serviceKeys(ns, "")[0], key(ns)], [consumer, member(consumer, producer), now, MAX_EDGES_PER_NAMESPACE]))) === 1;
    },
    async edges(ns, since) {
      const flat = await call(() => client.zrangebyscore(key(ns), `(${since}`, "+inf", "WITHSCORES"));
      const out: TopologyEdge[] = [];
      for (let i = 0; i < flat.length; i += 2) {
        const [consumer, producer] = JSON.parse(flat[i]) as [string, string];
        out.push({ consumer, producer, lastSeen: Number(flat[i + 1]) });
      }
      return out;
    },
    prune: (ns, before) => call(() => client.zremrangebyscore(key(ns), "-inf", before)),
    close: async () => {},
  };
}

/** The header by which a discovery call names its caller's service, and the one naming the caller's namespace. */
export const CONSUMER_HEADER = "x-gov-consumer";
export const CONSUMER_NAMESPACE_HEADER = "x-gov-consumer-namespace";

/** How often one process writes the same edge at most: discovery stays as fast with the header as without. */
export const EDGE_WRITE_INTERVAL_MS = 60_000;
/**
 * How soon a consumer that was not (yet) a service of its namespace, or a producer that did not (yet) exist, is checked
 * again: a service that discovers its dependencies before it (or they) register gets its edges from a few seconds
 * after they do, not a minute later.
 */
export const UNKNOWN_CONSUMER_RETRY_MS = 2_000;
/** Edges remembered as recently written; past it the memory starts over (a few extra writes, never unbounded). */
const MAX_REMEMBERED_EDGES = 50_000;

export interface TopologyRecorder {
  /**
   * Notes the discovery of `serviceId` in `namespace` by the caller of `ctx`, if it identifies itself. Never throws,
   * never waits. `found`: the discovery found live instances of it, so it exists; when it found none (or is not
   * said) the service may exist without any, or not at all, and the edge is recorded only if `serviceExists` says it does.
   */
  discovered(ctx: HandlerContext, namespace: string, serviceId: string, found?: boolean): void;
}

export interface TopologyRecorderDeps {
  store: TopologyStore;
  namespaceRule: NamespaceRule;
  now: () => number;
  /**
   * Whether `serviceId` is a service of `namespace`: asked (off the request's path) only for a discovery that found no
   * instance. Without it, only discoveries that found instances are recorded.
   */
  serviceExists?: (namespace: string, serviceId: string) => Promise<boolean>;
  /** Told about a failed edge write (the discovery call itself has already been answered). */
  onError?: (err: unknown) => void;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });
/** RFC 8187's form of a value beyond ASCII: `UTF-8''` and its UTF-8 bytes percent-encoded (what the registry client sends). */
const EXT_VALUE = /^UTF-8''((?:%[0-9A-Fa-f]{2}|[A-Za-z0-9!#$&+.^_`|~-])*)$/;

/**
 * A consumer header's value as text. A header travels as bytes, and what a client does with characters beyond ASCII
 * depends on its HTTP stack: fetch sends a Latin-1 "é" as one byte, Node's HTTP/1.1 client (Connect's) as its UTF-8
 * bytes, curl from a UTF-8 terminal the bytes it was given, and none can send "支付" as a string. So: a value in RFC
 * 8187's form (`UTF-8''%E6%94%AF%E4%BB%98`, pure ASCII on every stack; the registry client's) is percent-decoded;
 * bytes that are valid UTF-8 are read as UTF-8 (HTTP hands them over one character per byte); anything else stays as
 * it arrived (a Latin-1 "é" alone is no UTF-8 sequence).
 */
export function headerText(value: string): string {
  const ext = EXT_VALUE.exec(value);
  if (ext) {
    try {
      return decodeURIComponent(ext[1]);
    } catch {
      return value; // not UTF-8 once decoded: the check that follows refuses it like any malformed header
    }
  }
  if (!/[\u0080-\u00ff]/.test(value)) return value;
  try {
    return utf8.decode(Buffer.from(value, "latin1"));
  } catch {
    return value;
  }
}

/** Whether a caller-supplied header value passes `check`; a bad header records nothing but never fails discovery. */
function valid(check: () => void): boolean {
  try {
    check();
    return true;
  } catch {
    return false;
  }
}

/**
 * Records topology edges off the request's path: at most one store write per edge per `EDGE_WRITE_INTERVAL_MS` in this
 * process (per `UNKNOWN_CONSUMER_RETRY_MS` while the consumer is not a service of its namespace or the producer does not
 * exist), not awaited.
 * Anonymous calls (no `X-Gov-Consumer`), self-discovery, malformed headers and the discovery of a service that does not
 * exist record nothing. The consumer's namespace is `X-Gov-Consumer-Namespace` when given, else the request's; an edge
 * is recorded only in a namespace the caller may read (with security on), as the request's own always is: a user of
 * one namespace must not write topology into another it cannot even see.
 */
export function createTopologyRecorder(deps: TopologyRecorderDeps): TopologyRecorder {
  /** Edge → when this process may write it again. */
  const nextWrite = new Map<string, number>();
  return {
    discovered(ctx, namespace, serviceId, found) {
      const raw = ctx.requestHeader.get(CONSUMER_HEADER);
      if (!raw) return;
      const consumer = headerText(raw);
      const rawNs = ctx.requestHeader.get(CONSUMER_NAMESPACE_HEADER);
      const consumerNs = rawNs ? headerText(rawNs) : namespace;
      if (consumerNs === namespace && consumer === serviceId) return;
      const edgeKey = `${consumerNs}\n${consumer}\n${namespace}\n${serviceId}`;
      const now = deps.now();
      const next = nextWrite.get(edgeKey);
      if (next !== undefined && now < next) return;
      if (!valid(() => checkServiceId(consumer)) || (consumerNs !== namespace && !isValidNamespace(consumerNs, deps.namespaceRule))) return;
      if (consumerNs !== namespace && !mayAccess(callerOf(ctx), consumerNs, "r")) return;
      if (nextWrite.size >= MAX_REMEMBERED_EDGES) nextWrite.clear();
      nextWrite.set(edgeKey, now + EDGE_WRITE_INTERVAL_MS);
      const producer = consumerNs === namespace ? serviceId : `${namespace}.${serviceId}`;
      // A discovery that found instances tells that the producer exists; only one that found none costs a look-up.
      const exists = found === true ? Promise.resolve(true) : (deps.serviceExists?.(namespace, serviceId) ?? Promise.resolve(false));
      exists.then((yes) => yes && deps.store.touch(consumerNs, consumer, producer, now)).then(
        (recorded) => {
          if (!recorded) nextWrite.set(edgeKey, now + UNKNOWN_CONSUMER_RETRY_MS);
        },
        (err: unknown) => {
          nextWrite.delete(edgeKey); // try again with the next call
          deps.onError?.(err);
        },
      );
    },
  };
}
