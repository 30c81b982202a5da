/**
 * The storage port of the config service. Two adapters implement it with the same behaviour:
 * `memory-config-store.ts` (embedded, in-process) and `redis-config-store.ts` (standalone Redis or Cluster).
 * Both pass `test/config-store.contract.ts`.
 */

export type ConfigOp = "set" | "rollback" | "remove";

export interface ConfigRecord {
  configId: string;
  data: string;
  /** SHA-256 hex of data. */
  hash: string;
  version: number;
  /** Epoch milliseconds. */
  createTime: number;
}

/** A superseded version: the config as it was, plus the operation that superseded it and when. */
export interface ConfigHistoryRecord extends ConfigRecord {
  op: ConfigOp;
  opTime: number;
}

export interface ConfigVersionInfo {
  configId: string;
  version: number;
  op: ConfigOp;
  opTime: number;
}

/** Published after every change, to this process's subscribers and (on Redis) to every other process. */
export interface ConfigChange {
  namespace: string;
  configId: string;
  op: ConfigOp;
  /** The new current version (the removed one for op "remove"). */
  version: number;
}

export interface WriteResult {
  /** false when nothing was written because the content equals the current content. */
  changed: boolean;
  /** The current version after the call. */
  version: number;
}

export interface ConfigStore {
  /** "embedded", "redis" or "redis-cluster": printed at startup. */
  readonly kind: string;
  /** Config ids of a namespace, sorted. */
  list(namespace: string): Promise<string[]>;
  /** Records are immutable: callers must not change them (adapters may return the same object to many readers). */
  get(namespace: string, configId: string): Promise<ConfigRecord | undefined>;
  /** `hash` is the SHA-256 hex of `data` (computed by the caller, once). */
  set(namespace: string, configId: string, data: string, hash: string, now: number): Promise<WriteResult>;
  /**
   * `set` only where the config has no current version (an import with policy `skip`): undefined, and nothing written,
   * when it has one. Decided in the same atomic step as the write, so a config another client writes after the caller
   * looked is never replaced.
   */
  create(namespace: string, configId: string, data: string, hash: string, now: number): Promise<WriteResult | undefined>;
  /** false when the config does not exist. */
  remove(namespace: string, configId: string, now: number): Promise<boolean>;
  /** undefined when the target version is neither current nor in the history. */
  rollback(namespace: string, configId: string, targetVersion: number, now: number): Promise<WriteResult | undefined>;
  /** Superseded versions, newest first. */
  versions(namespace: string, configId: string): Promise<ConfigVersionInfo[]>;
  version(namespace: string, configId: string, version: number): Promise<ConfigHistoryRecord | undefined>;
  /** How many configs the namespace holds (with a current version): one counter read, no scan. */
  count(namespace: string): Promise<number>;
  /**
   * Removes every config of the namespace with its whole history (also the history of configs removed earlier),
   * atomically, and publishes a "remove" for each config that had a current version so caches and watches follow.
   * Answers how many configs were removed (0 for an empty namespace). With `onlyIfEmpty`, a namespace that holds a
   * config (decided atomically with the delete) is left alone and the answer is undefined: only what deleted configs
   * left behind (their history) is removed.
   */
  deleteNamespace(namespace: string, options?: { onlyIfEmpty?: boolean }): Promise<number | undefined>;
  /**
   * Calls `listener` for every change in any namespace; returns the unsubscribe function. `onResync` is called when
   * the store had lost its event feed and has it back: changes may have been missed, so re-read what you follow.
   */
  subscribe(listener: (change: ConfigChange) => void, onResync?: () => void): () => void;
  close(): Promise<void>;
}

export interface ConfigStoreOptions {
  /** How many superseded versions each config keeps (gov.config.history.max-versions). */
  maxVersions: number;
}

// Adapters throw this when the backing store is unreachable; the service answers 503 unavailable.
export { StoreUnavailableError } from "@gov/service-kit";
