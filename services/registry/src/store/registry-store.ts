/**
 * The storage port of the registry service. Two adapters implement it with the same behaviour:
 * `memory-registry-store.ts` (embedded, in-process) and `redis-registry-store.ts` (standalone Redis or Cluster).
 * Both pass `test/registry-store.contract.ts`.
 *
 * Time is the caller's (`now`, epoch ms): an instance is live while `ttlAt > now`. Expired instances are never
 * returned by a read; their records are dropped lazily (by the next write to their service) and by `sweep`.
 */

/** An instance as stored. Records are immutable: callers must not change them. */
export interface InstanceRecord {
  instanceId: string;
  serviceId: string;
  schema: string;
  host: string;
  port: number;
  weight: number;
  isEphemeral: boolean;
  /** Epoch ms at which an ephemeral instance expires; undefined for a fixed instance. */
  ttlAt?: number;
  /** The ttl a renewal extends by (ms); 0 for a fixed instance. */
  ttlMs: number;
  metadata: Record<string, string>;
}

export type InstanceOp = "register" | "renew" | "deregister" | "expired" | "metadata";
export type ServiceOp = "service_add" | "service_remove";
export type RegistryOp = InstanceOp | ServiceOp;

/** Published after every change, to this process's subscribers and (on Redis) to every other process. */
export interface RegistryChange {
  namespace: string;
  serviceId: string;
  op: RegistryOp;
  /** Set for instance ops. */
  instanceId?: string;
}

export type DeleteServiceResult = "removed" | "not_found" | "has_instances";

export interface RenewResult {
  /** The new expiry; undefined for a fixed instance (renewing it changes nothing). */
  ttlAt?: number;
}

export interface RegistryStore {
  /** "embedded", "redis" or "redis-cluster": printed at startup. */
  readonly kind: string;
  /** Service ids of a namespace, sorted. */
  listServices(namespace: string): Promise<string[]>;
  /** true when the service was created, false when it existed. */
  putService(namespace: string, serviceId: string, now?: number): Promise<boolean>;
  /**
   * Every service of the namespace with the time it was created (epoch ms, the `now` of the call that created it; 0 for
   * a service created before births were recorded). Topology reads drop an edge last seen before its service was born:
   * it was recorded for an earlier service of the same name, deleted since.
   */
  listServiceBirths(namespace: string): Promise<Map<string, number>>;
  /** Refuses ("has_instances") while the service has live instances at `now`. */
  deleteService(namespace: string, serviceId: string, now: number): Promise<DeleteServiceResult>;
  /** Live instances at `now`, sorted by instance id. */
  listInstances(namespace: string, serviceId: string, now: number): Promise<InstanceRecord[]>;
  /** The instance when it is live at `now`. */
  getInstance(namespace: string, serviceId: string, instanceId: string, now: number): Promise<InstanceRecord | undefined>;
  /**
   * Stores `instance` (replacing any earlier record of the same id, metadata included), adds it to its service
   * (created if absent). `ttlAt` undefined makes it fixed: it never expires.
   */
  register(namespace: string, instance: InstanceRecord, now: number): Promise<void>;
  /** false when the instance is unknown or expired at `now`. */
  deregister(namespace: string, serviceId: string, instanceId: string, now: number): Promise<boolean>;
  /** undefined when the instance is unknown or expired at `now`; else it lives until now + its ttlMs. */
  renew(namespace: string, serviceId: string, instanceId: string, now: number): Promise<RenewResult | undefined>;
  /** Replaces the metadata whole; false when the instance is unknown or expired at `now`. */
  setMetadata(namespace: string, serviceId: string, instanceId: string, metadata: Record<string, string>, now: number): Promise<boolean>;
  /** Live instances per service at `now`, sorted by service id (every service, also those with none). */
  stats(namespace: string, now: number): Promise<{ serviceId: string; instanceCount: number }[]>;
  /**
   * Drops every instance of the namespace that expired by `now`, publishing "expired" for each; returns how many.
   * Records each service's live instance count for `sweptStats` (the stats worker sweeps every namespace each period).
   * `mayWrite`, checked right before the deletions are sent: false (the stats mutex is no longer this process's) sends
   * none — a worker suspended while it read the service list must not sweep beside the worker that took over.
   */
  sweep(namespace: string, now: number, mayWrite?: () => boolean): Promise<number>;
  /**
   * Live instances per service as counted by the last sweep, sorted by service id (every service; one not swept yet
   * counts 0). One read whatever the namespace's size: what service stats answer.
   */
  sweptStats(namespace: string): Promise<{ serviceId: string; instanceCount: number }[]>;
  /**
   * Calls `listener` for every change in any namespace; returns the unsubscribe function. `onResync` is called when
   * the store had lost its event feed and has it back: changes may have been missed, so re-read what you follow.
   */
  subscribe(listener: (change: RegistryChange) => void, onResync?: () => void): () => void;
  /** How many services the namespace holds: one counter read, no scan. */
  countServices(namespace: string): Promise<number>;
  /**
   * Removes every service of the namespace with all its instances (live or not) and their counts, atomically, and
   * publishes a "deregister" for each instance and a "service_remove" for each service, so watches and caches follow.
   * With `onlyIfEmpty`, a namespace that holds a service (decided atomically with the delete) is left alone and the
   * answer is undefined.
   */
  deleteNamespace(namespace: string, options?: { onlyIfEmpty?: boolean }): Promise<{ services: number; instances: number } | undefined>;
  close(): Promise<void>;
}

/** Instance ops whose renewal events are published at most about twice per ttl (see `shouldPublishRenew`). */
export const isInstanceOp = (op: RegistryOp): op is InstanceOp => op !== "service_add" && op !== "service_remove";

/**
 * Renewals are throttled: a client renewing every few seconds would otherwise flood every watcher. A renewal is
 * published only when less than half the ttl was left before it; watchers that miss the others re-read when the ttl
 * they know runs out (see watch-instances.ts), so they never drop a live instance.
 */
export const shouldPublishRenew = (oldTtlAt: number, now: number, ttlMs: number) => oldTtlAt - now < ttlMs / 2;

// Adapters throw this when the backing store is unreachable; the service answers 503 unavailable.
export { StoreUnavailableError } from "@gov/service-kit";
