import type { EventEmitter } from "node:events";
import { Cluster, type Redis } from "ioredis";
import type { RedisClient } from "./connect.js";
import { quitQuietly } from "./outage.js";
import { keepSlotsCurrent } from "./slot-refresh.js";

/** What a subscriber hears about its pattern. */
export interface PatternHandlers {
  message(channel: string, message: string): void;
  /** The server confirmed the subscription (again). Messages published while it was down are lost: resync here. */
  live(): void;
  /** The connection carrying it closed; it is being re-established. */
  lost(): void;
}

export interface PatternSubscription {
  /** Resolves when the subscription is first confirmed (never rejects; it keeps retrying). */
  firstLive: Promise<void>;
  /**
   * Stops receiving for now (PUNSUBSCRIBE, unless another subscriber shares the pattern): told `lost` at once, and
   * nothing more until `resume`. For a subscriber that needs no events for a while, so Redis sends it none.
   */
  pause(): void;
  /** Subscribes again after `pause`; `live` when the server has confirmed it. */
  resume(): void;
  stop(): void;
}

/**
 * One Pub/Sub connection per process, shared by every store: each store subscribes its own PSUBSCRIBE pattern, and
 * the hub keeps all of them alive across reconnects, telling each subscriber when it is live and when it was lost.
 */
export interface SubscriberHub {
  subscribe(pattern: string, on: PatternHandlers): PatternSubscription;
  /** Stops every subscription and closes the hub's connection. */
  close(): Promise<void>;
}

interface Entry {
  pattern: string;
  on: PatternHandlers;
  markFirstLive: () => void;
  /** False while paused: not subscribed, told nothing. */
  active: boolean;
}

/** A hub over `client.duplicate()` (opened on first subscribe); `client` itself is left alone. */
export function createSubscriberHub(client: RedisClient): SubscriberHub {
  const entries = new Set<Entry>();
  let sub: RedisClient | undefined;
  let stopped = false;
  let live = false;
  let busy = false;
  let again = false;
  let retry: NodeJS.Timeout | undefined;

  const active = () => [...entries].filter((e) => e.active);
  const patterns = () => [...new Set(active().map((e) => e.pattern))];

  const attempt = async (): Promise<void> => {
    clearTimeout(retry);
    if (stopped || live || !sub || patterns().length === 0) return;
    if (busy) return void (again = true); // e.g. "ready" arrived while a failing attempt is in flight
    busy = true;
    again = false;
    try {
      await sub.psubscribe(...patterns());
      const conn = subscriberConnectionOf(sub);
      if (stopped || conn.status !== "ready") throw new Error("subscriber connection is not ready");
      (conn as EventEmitter).once("close", onClose);
      live = true;
      for (const e of active()) markLive(e);
    } catch {
      if (!stopped) retry = setTimeout(attempt, 200);
    } finally {
      busy = false;
    }
    if (again) void attempt();
  };
  const markLive = (e: Entry) => {
    e.on.live();
    e.markFirstLive();
  };
  const onClose = () => {
    if (stopped) return;
    live = false;
    for (const e of active()) e.on.lost();
    void attempt();
  };

  // A Cluster master that goes away and answers again may hold other data than before (restarted without persistence:
  // empty; a replica promoted over writes it had not received), and the hub's own connection, on another node, hears
  // nothing of it: read caches kept serving configs that were gone, watches skipped the versions that started again at
  // 1, the namespace index was not written again. So when a connection of `client` to a node closes, every subscriber
  // is told at once that it lost the feed and that it is live again: caches start over, watches re-read (waiting out
  // the node's outage). A connection that closes and comes back with its data intact costs a re-read, nothing more.
  const nodeDropped = () => {
    if (stopped || !live) return;
    for (const e of active()) e.on.lost();
    for (const e of active()) markLive(e);
  };
  if (client instanceof Cluster) {
    const watched = new WeakSet<Redis>();
    const watch = (node: Redis) => {
      if (watched.has(node)) return;
      watched.add(node);
      // once per connection that had been ready: its failed reconnect attempts close too, and are the same outage
      let up = node.status === "ready";
      node.on("ready", () => void (up = true));
      node.on("close", () => {
        if (!up) return;
        up = false;
        nodeDropped();
      });
    };
    for (const node of client.nodes()) watch(node);
    client.on("+node", watch);
  }

  const open = (): RedisClient => {
    // A Cluster's subscriber must move off a frozen node, which sends neither messages nor errors (keepSlotsCurrent).
    // A standalone one does not subscribe again by itself on reconnecting (autoResubscribe): the hub does, on "ready"
    // below, and catches a failure. ioredis' own PSUBSCRIBE was nobody's promise: when it failed (a reply later than
    // the command timeout, the process stalled after a restart of Redis) the rejection went unhandled, an error
    // logged as a bug in a process and a failed run under vitest. (A Cluster's subscriber catches its own.)
    const s = client instanceof Cluster ? keepSlotsCurrent(client.duplicate()) : client.duplicate({ autoResubscribe: false });
    const events = s as EventEmitter; // Redis and Cluster overload on() differently
    events.on("pmessage", (pattern: string, channel: string, message: string) => {
      for (const e of entries) if (e.active && e.pattern === pattern) e.on.message(channel, message);
    });
    events.on("error", () => {}); // reported through lost/live; avoids ioredis' "unhandled error event" noise
    events.on("ready", () => void attempt()); // a reconnected standalone client: subscribe again at once
    return s;
  };

  /** Adds `entry`'s pattern on a connection that is up (a failure means it is going down, and comes back with it). */
  const add = (entry: Entry) => {
    if (!live) return void attempt();
    sub!.psubscribe(entry.pattern).then(() => live && entry.active && entries.has(entry) && markLive(entry), () => {});
  };
  /** Drops `entry`'s pattern unless an active subscriber still has it. */
  const remove = (entry: Entry) => {
    if (live && !patterns().includes(entry.pattern)) sub?.punsubscribe(entry.pattern).catch(() => {});
  };

  return {
    subscribe(pattern, on) {
      let markFirstLive: () => void = () => {};
      const firstLive = new Promise<void>((resolve) => (markFirstLive = resolve));
      const entry: Entry = { pattern, on, markFirstLive, active: true };
      entries.add(entry);
      sub ??= open();
      add(entry);
      return {
        firstLive,
        pause() {
          if (!entry.active || !entries.has(entry)) return;
          entry.active = false;
          remove(entry);
          on.lost();
        },
        resume() {
          if (entry.active || !entries.has(entry)) return;
          entry.active = true;
          add(entry);
        },
        stop() {
          if (!entries.delete(entry)) return;
          if (entry.active) remove(entry);
        },
      };
    },
    async close() {
      stopped = true;
      clearTimeout(retry);
      entries.clear();
      if (sub) await quitQuietly(sub);
    },
  };
}

/**
 * The connection that carries the subscription. A Cluster client subscribes through one node connection that
 * ioredis keeps private and silently replaces when that node goes away (messages published meanwhile are
 * lost), so we watch that connection itself; the Cluster's own events are the fallback.
 */
function subscriberConnectionOf(sub: RedisClient): Redis | RedisClient {
  if (!(sub instanceof Cluster)) return sub;
  const internal = (sub as unknown as { subscriber?: { getInstance?: () => Redis | null } }).subscriber;
  return internal?.getInstance?.() ?? sub;
}
