/**
 * The namespace index (contract §2): every namespace that exists, and the server-wide current context namespace, kept
 * in the system namespace. Two adapters with the same behaviour: `memory-namespace-index.ts` (embedded) and
 * `redis-namespace-index.ts` (standalone Redis or Cluster); both pass `test/namespace-index.contract.ts`.
 */
export interface NamespaceIndex {
  /** "embedded", "redis" or "redis-cluster". */
  readonly kind: string;
  /** The system namespace (`gov.namespace.system`): always indexed, never removable. */
  readonly system: string;
  /**
   * Indexes `namespace` (idempotent). Called before every config or service write, so it is cached per process: once a
   * namespace is known here (and no removal was announced since), it costs no store round trip.
   */
  add(namespace: string): Promise<void>;
  /**
   * Indexes `namespace` in the store, bypassing the cache: true when this call indexed it, false when it already was
   * (one atomic step, so of two concurrent creates exactly one answers true).
   */
  create(namespace: string): Promise<boolean>;
  /** true when `namespace` is indexed (read from the store, not the cache). */
  has(namespace: string): Promise<boolean>;
  /** Every indexed namespace, sorted (the system namespace included). */
  list(): Promise<string[]>;
  /** How many namespaces are indexed (one counter read, no scan). */
  count(): Promise<number>;
  /**
   * Drops `namespace` from the index and announces it (other processes' caches forget it); when it was the current
   * namespace, the system namespace becomes current. false when it was not indexed. Throws for the system namespace.
   */
  remove(namespace: string): Promise<boolean>;
  /** The current context namespace: one value for the whole server; the system namespace until one is set. */
  current(): Promise<string>;
  /** Makes `namespace` current for every process of the server, indexing it too (atomically). */
  setCurrent(namespace: string): Promise<void>;
  close(): Promise<void>;
}

/** Thrown by `remove` for the system namespace: callers refuse it before (this is the last guard). */
export class SystemNamespaceError extends Error {
  constructor(system: string) {
    super(`namespace "${system}" is the system namespace (gov.namespace.system): it holds the namespace index, users and roles, and cannot be deleted`);
    this.name = "SystemNamespaceError";
  }
}
