import { Cluster, Command, type ChainableCommander } from "ioredis";
import { duplicateRedis, type RedisClient } from "./connect.js";
import { checkScriptCall, runScript, type LuaScript } from "./scripts.js";
import { UnderReplicatedWriteError } from "./store-errors.js";

/**
 * Redis replicates asynchronously: a write a master acknowledged and then lost in a crash, before any replica had it,
 * is gone after the failover. With a replica policy on the client, durable writes are followed by
 * `WAIT minReplicas timeoutMs` on the connection that carried them — WAIT counts only that connection's writes, and a
 * Lua script cannot call it — so the caller is answered once the write is on `minReplicas` replicas too.
 */
export interface ReplicaPolicy {
  /** Replicas that must hold a write before it is acknowledged; 0 = do not wait. */
  minReplicas: number;
  /** Longest WAIT, ms (> 0: WAIT 0 would block forever). */
  timeoutMs: number;
  /** Told once per master per episode of writes that reached fewer replicas in time (and once when it is over). */
  logger?: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
  /** Counted for every such write (a Prometheus counter). */
  underReplicated?: { inc(): void };
}

/** Durable writes of one client: their own connection(s) and one queue per master with a WAIT in flight. */
interface Durability {
  policy: ReplicaPolicy;
  /**
   * A second client (`duplicate()`) that carries only durable writes. WAIT blocks the connection it is sent on, so on
   * the shared client every read queued behind it would wait for the replicas too (up to the whole timeout while a
   * shard has none, as right after a failover).
   */
  writer: RedisClient;
  groups: Map<string, Pending[]>;
  /**
   * The masters inside an episode of under-replicated writes (logged at its start and end only). Per master, not per
   * client: on a Cluster whose one shard lost its replica, the other shards' writes do not end that shard's episode —
   * one flag for all would log "lost" and "again" by turns for as long as both kinds of write went on.
   */
  short: Set<string>;
}

interface Pending {
  key: string;
  write(batch: ChainableCommander): unknown;
  resolve(value: unknown): void;
  reject(err: unknown): void;
  redirections: number;
  /** A script write told that the node does not have the script: it sends the whole script (EVAL) next time. */
  noScript?: () => void;
  /** Fail (UnderReplicatedWriteError) rather than succeed when WAIT saw too few replicas: see DurableWriteOptions. */
  failUnderReplicated?: boolean;
}

/** How one durable write treats a WAIT that saw fewer replicas than the policy asks for. */
export interface DurableWriteOptions {
  /**
   * Reject with {@link UnderReplicatedWriteError} (its `reply` is the write's answer on the master) instead of
   * succeeding. For writes whose loss in a failover is worse than their failure, because what they hand out would be
   * handed out again by the new master: an id range, a machine-id lease. Such a write is counted and logged as
   * under-replicated like any other. Without a replica policy it changes nothing.
   */
  failUnderReplicated?: boolean;
}

const durabilities = new WeakMap<object, Durability>();

/**
 * Makes every durable write through `client` ({@link writeDurably}, {@link runDurableScript}) wait for
 * `policy.minReplicas` replicas. Called once by the process that owns the client (the process runner, from
 * `gov.redis.min-replicas` and `gov.redis.replica-ack-timeout`); resolves once the writer's connection is ready.
 * Returns what closes that connection; `quitQuietly(client)` closes it too.
 */
export async function requireReplicas(client: RedisClient, policy: ReplicaPolicy, readyTimeoutMs = 10_000): Promise<() => Promise<void>> {
  await closeDurableWriter(client); // a second policy replaces the first (and its connection)
  if (policy.minReplicas <= 0) return async () => {};
  if (!(policy.timeoutMs > 0)) throw new Error("a replica acknowledgement timeout must be > 0 ms (WAIT 0 blocks forever)");
  const writer = duplicateRedis(client);
  writer.on("error", () => {}); // failures reach the writes; see createRedis
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the durable writes' Redis connection was not ready within ${readyTimeoutMs} ms`)), readyTimeoutMs);
    writer.once("ready", () => {
      clearTimeout(timer);
      resolve();
    });
  }).catch((err) => {
    writer.disconnect();
    throw err;
  });
  durabilities.set(client, { policy, writer, groups: new Map(), short: new Set() });
  return () => closeDurableWriter(client);
}

/**
 * How long a durable write through `client` may wait for its replicas, ms (0 without a replica policy): what a caller
 * that bounds such a write must allow on top of its round trip — while a shard has fewer replicas than required (as
 * right after a failover) every write takes the whole of it, and succeeds.
 */
export const replicaWaitMsOf = (client: RedisClient | undefined): number => (client && durabilities.get(client)?.policy.timeoutMs) || 0;

/** The connection that carries `client`'s durable writes, if it has a replica policy. */
export const durableWriterOf = (client: RedisClient): RedisClient | undefined => durabilities.get(client)?.writer;

/** Closes the durable writes' connection of `client`, if it has one (QUIT at most 1 s, then disconnect). */
export async function closeDurableWriter(client: RedisClient): Promise<void> {
  const durability = durabilities.get(client);
  if (!durability) return;
  durabilities.delete(client);
  const { writer } = durability;
  if (writer.status === "ready") await Promise.race([writer.quit().catch(() => {}), new Promise((r) => setTimeout(r, 1000).unref())]);
  writer.disconnect();
}

/** Redirections refuse a command unexecuted: the write may be sent again to the slot's new owner. */
// NOSCRIPT: the node does not know the script (never loaded there, or its script cache was emptied: a failover, a
// resync, SCRIPT FLUSH); nothing was executed, and the write is sent again with the whole script (runDurableScript).
const REDIRECTED = /^(MOVED|ASK) |same slots allocation group|^NOSCRIPT /;
const MAX_REDIRECTIONS = 3;
/** Most writes one pipeline carries ahead of its WAIT. */
const MAX_BATCH = 256;

/**
 * Runs a write of `key` (every key of a write shares its hash slot) and, when the client has a replica policy, WAIT
 * behind it in one pipeline: ioredis sends a pipeline as one write to one connection (on a Cluster: the node serving
 * the keys' slot; WAIT has no key and goes along), so the WAIT is answered by the connection and master that applied
 * the write. Writes to one master issued while its WAIT is in flight share the next one (group commit): one round
 * trip to the replicas per batch, not per write. Returns the write's reply.
 *
 * - WAIT short of `minReplicas` after the timeout: the write stands on the master (it cannot be undone), so this
 *   succeeds, counts it and warns once per episode — refusing would report as failed a write that was applied.
 * - WAIT failing (the master died after the write): its error is thrown — a connection error, which stores report as
 *   "outcome unknown" (504): the write was applied but may be lost at the failover.
 * - A redirection (stale slot map during a failover): the write was refused unexecuted; the slot map is refreshed and
 *   the write sent again to the slot's new owner (at most 3 times).
 */
export function writeDurably<T = unknown>(client: RedisClient, key: string, write: (batch: ChainableCommander) => unknown, options: DurableWriteOptions = {}): Promise<T> {
  return writeDurablyPending<T>(client, key, write, options);
}

function writeDurablyPending<T = unknown>(client: RedisClient, key: string, write: (batch: ChainableCommander) => unknown, options: DurableWriteOptions, noScript?: () => void): Promise<T> {
  // `write` adds exactly one command to `batch` (a script, or one command such as SADD): replies are matched by position.
  const durability = durabilities.get(client);
  if (!durability) {
    // Nothing to wait for: a one-command pipeline (ioredis follows its redirections itself).
    const batch = client.pipeline();
    try {
      write(batch);
    } catch (err) {
      return Promise.reject(err);
    }
    return batch.exec().then((replies) => {
      const [err, result] = replies?.[0] ?? [new Error("the write got no reply")];
      if (err) throw err;
      return result as T;
    });
  }
  return new Promise<T>((resolve, reject) =>
    enqueue(durability, { key, write, noScript, failUnderReplicated: options.failUnderReplicated, resolve: resolve as (v: unknown) => void, reject, redirections: 0 }),
  );
}

/** {@link runScript} for a script that writes: the same call, durable per the client's replica policy. */
export function runDurableScript(client: RedisClient, script: LuaScript, keys: string[], args: (string | number)[], options: DurableWriteOptions = {}): Promise<unknown> {
  const durability = durabilities.get(client);
  // Without a policy: the plain call, written with the turn's other commands (standalone, see writeOncePerTurn), costing nothing.
  if (!durability) return runScript(client, script, keys, args);
  try {
    checkScriptCall(script, keys, args);
  } catch (err) {
    return Promise.reject(err);
  }
  // EVALSHA, and EVAL after a NOSCRIPT, as plain commands of the pipeline: not ioredis' script command, which answers
  // a NOSCRIPT by sending the script again on its own, outside the pipeline and behind its WAIT (the write was then
  // acknowledged by a WAIT that ran before it), or reports the NOSCRIPT of that resend as the write's failure.
  let whole = false;
  return writeDurablyPending(
    client,
    keys[0] ?? "",
    (batch) => (whole ? batch.eval(script.lua, keys.length, ...keys, ...args) : batch.evalsha(script.sha, keys.length, ...keys, ...args)),
    options,
    () => (whole = true),
  );
}

/**
 * The node group (master and replicas) serving `key`, per the writer's slot map: writes to one master share a
 * pipeline and its WAIT. One WAIT at a time per connection: Redis serves a connection's commands in order, so a second
 * WAIT sent behind the first would wait for it too (a whole timeout each while a shard has no replica).
 */
function groupOf(writer: RedisClient, key: string): string {
  if (!(writer instanceof Cluster)) return "";
  const slot = new Command("get", [key]).getSlot() ?? 0; // ioredis' own slot computation (CRC16 of the {tag})
  return writer.slots[slot]?.join(";") ?? `slot ${slot}`;
}

/** Queues a write; a group with nothing in flight sends at the end of this tick, else after its WAIT returns. */
function enqueue(d: Durability, p: Pending): void {
  const group = groupOf(d.writer, p.key);
  const queue = d.groups.get(group);
  if (queue) {
    queue.push(p);
    return;
  }
  const fresh = [p];
  d.groups.set(group, fresh);
  queueMicrotask(() => void drain(d, group, fresh));
}

async function drain(d: Durability, group: string, queue: Pending[]): Promise<void> {
  try {
    while (queue.length > 0) await send(d, queue.splice(0, MAX_BATCH));
  } catch (err) {
    for (const p of queue.splice(0)) p.reject(err); // never leave a group blocked behind a failure of our own
  } finally {
    d.groups.delete(group);
  }
}

/** One pipeline: the writes, then WAIT; each write is answered by its own reply and the WAIT's. */
async function send(d: Durability, batch: Pending[]): Promise<void> {
  const pipeline = d.writer.pipeline();
  const sent: Pending[] = [];
  for (const p of batch) {
    const before = pipeline.length;
    try {
      p.write(pipeline);
    } catch (err) {
      p.reject(err);
      continue;
    }
    // Replies are matched to writes by position: one command each (a script, or one command; no MULTI).
    if (pipeline.length !== before + 1) {
      // A programming error; the pipeline is unusable now, so none of the batch is sent.
      const err = new Error(`a durable write must add exactly one command to the pipeline (it added ${pipeline.length - before})`);
      for (const q of batch) q.reject(err);
      return;
    }
    sent.push(p);
  }
  if (sent.length === 0) return;
  pipeline.wait(d.policy.minReplicas, d.policy.timeoutMs);
  let replies: [Error | null, unknown][];
  try {
    replies = (await pipeline.exec()) ?? [];
  } catch (err) {
    // The pipeline was refused as a whole before it was sent (e.g. the slot map changed under it).
    return redirect(d, sent, err);
  }
  const [waitErr, acked] = replies[sent.length] ?? [new Error("WAIT got no reply")];
  const moved: Pending[] = [];
  let movedErr: Error | undefined;
  let applied = 0;
  sent.forEach((p, i) => {
    const [err, result] = replies[i] ?? [new Error("the write got no reply")];
    if (err && REDIRECTED.test(err.message) && p.redirections < MAX_REDIRECTIONS) {
      if (/^NOSCRIPT /.test(err.message)) p.noScript?.();
      movedErr = err;
      return moved.push(p);
    }
    if (err) return p.reject(err);
    if (waitErr) return p.reject(waitErr);
    applied++;
    if (p.failUnderReplicated && !(Number(acked) >= d.policy.minReplicas)) return p.reject(underReplicated(d.policy, Number(acked), result));
    p.resolve(result);
  });
  // The master as the slot map has it now, not as it had it when the writes were queued: ioredis follows a MOVED
  // pipeline to the slot's new owner itself (and notes it in the map), so during a failover that is who answered.
  if (applied > 0) noteAcks(d, masterOf(d, sent[0].key), Number(acked), applied);
  if (movedErr) await redirect(d, moved, movedErr);
}

/** Sends refused writes again after refreshing the slot map, or fails them when they were redirected too often. */
async function redirect(d: Durability, writes: Pending[], err: unknown): Promise<void> {
  const again = writes.filter((p) => p.redirections++ < MAX_REDIRECTIONS && err instanceof Error && REDIRECTED.test(err.message));
  for (const p of writes) if (!again.includes(p)) p.reject(err);
  if (again.length === 0) return;
  if (d.writer instanceof Cluster) {
    const cluster = d.writer;
    await new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()));
  }
  for (const p of again) enqueue(d, p);
}

/** The master serving `key`: the first node of its slot's entry in the slot map (the only one on a standalone Redis). */
function masterOf(d: Durability, key: string): string {
  if (d.writer instanceof Cluster) return groupOf(d.writer, key).split(";")[0];
  const { host, port } = d.writer.options;
  return `${host ?? "localhost"}:${port ?? 6379}`;
}

const shortOf = (policy: ReplicaPolicy, acked: number) => `Redis write acknowledged by ${acked} of ${policy.minReplicas} required replicas within ${policy.timeoutMs} ms`;

function underReplicated(policy: ReplicaPolicy, acked: number, reply: unknown): UnderReplicatedWriteError {
  return new UnderReplicatedWriteError(
    `${shortOf(policy, acked)}: it is applied on the master but a failover could lose it, so what it handed out is not used; retry when the replicas are back`,
    reply,
  );
}

function noteAcks(d: Durability, master: string, acked: number, writes: number): void {
  const { policy } = d;
  if (acked >= policy.minReplicas) {
    if (d.short.delete(master)) policy.logger?.info({ master, replicas: acked, required: policy.minReplicas }, "Redis writes reach the required replicas again");
    return;
  }
  for (let i = 0; i < writes; i++) policy.underReplicated?.inc();
  if (!d.short.has(master)) {
    d.short.add(master);
    policy.logger?.warn(
      { master, replicas: acked, required: policy.minReplicas, timeoutMs: policy.timeoutMs },
      `${shortOf(policy, acked)}: it is applied on the master but would be lost if the master failed now; further such writes are counted in gov_redis_under_replicated_writes_total`,
    );
  }
}
