import type { EventEmitter } from "node:events";
import type { RedisClient } from "./connect.js";
import { sleep } from "./outage.js";
import { createSubscriberHub, type SubscriberHub } from "./subscriber-hub.js";

/** A store's change events for its followers (watches), with the resync signal Pub/Sub needs. */
export interface ChangeFeed<C> {
  /** `listener` gets every change; `onResync` when changes may have been missed (the feed was down). */
  subscribe(listener: (change: C) => void, onResync?: () => void): () => void;
  /** Whether any follower is subscribed (a store may then skip decoding events nobody needs). */
  readonly followed: boolean;
  /** The store is about to need events again (a read it would cache): resumes a subscription paused as idle. */
  wake(): void;
  /** Stops the subscription (and the hub, when the feed opened its own). */
  close(): Promise<void>;
}

export interface ChangeFeedOptions<C> {
  /** The process's shared hub; without one the feed opens its own connection (`client.duplicate()`). */
  hub?: SubscriberHub;
  /** The PSUBSCRIBE pattern of the store's event channels. */
  pattern: string;
  parse(channel: string, message: string): C | undefined;
  /** With no follower: true to drop an event undecoded (e.g. nothing cached of its namespace). */
  skip?(channel: string): boolean;
  /** Every decoded change, before the followers (e.g. invalidate a read cache). */
  onChange?(change: C): void;
  /**
   * With no follower: true when the store needs no events at all now (e.g. nothing in its read cache, no read under
   * way). Asked every `idleCheckMs`; after two such answers in a row the feed pauses its subscription (`onLost`), so
   * that Redis sends this process nothing — not even the echo of its own writes — until `wake()` or a follower resumes
   * it (`onLive` once confirmed). Without it the feed is subscribed for as long as it lives.
   */
  idle?(): boolean;
  /** How often `idle` is asked (default 250 ms). */
  idleCheckMs?: number;
  /** The subscription is (again) live / was lost (e.g. start or stop trusting a read cache). */
  onLive?(): void;
  onLost?(): void;
  /** How long creation waits for the first confirmation (default 5000 ms). */
  subscribeTimeoutMs?: number;
}

/**
 * Callbacks waiting for a client's next "ready", behind one listener per client: a process follows a dozen feeds on
 * one client, and one listener each went past Node's limit of 10 ("MaxListenersExceededWarning: Possible EventEmitter
 * memory leak") at every reconnect. Returns what cancels the wait.
 */
const waitingForReady = new WeakMap<EventEmitter, Set<() => void>>();
function whenReady(client: EventEmitter, callback: () => void): () => void {
  let waiting = waitingForReady.get(client);
  if (!waiting) {
    const callbacks = new Set<() => void>();
    waitingForReady.set(client, (waiting = callbacks));
    client.once("ready", () => {
      waitingForReady.delete(client);
      for (const c of callbacks) c();
    });
  }
  waiting.add(callback);
  return () => waiting.delete(callback);
}

/**
 * Follows a store's change events on Pub/Sub and tells its followers to resync after every interruption — once the
 * command connection answers again, or their re-read would fail. Pub/Sub does not replay what was missed; a first
 * confirmation that arrives only after creation stopped waiting counts as such an interruption too.
 */
export async function followChanges<C>(client: RedisClient, options: ChangeFeedOptions<C>): Promise<ChangeFeed<C>> {
  const listeners = new Set<(change: C) => void>();
  const resyncs = new Set<() => void>();
  let everLive = false;
  let announcePending = false;
  let cancelAnnounce = () => {};
  const announce = () => {
    announcePending = false;
    resyncs.forEach((r) => queueMicrotask(r));
  };
  const hub = options.hub ?? createSubscriberHub(client);
  const subscription = hub.subscribe(options.pattern, {
    message(channel, message) {
      if (listeners.size === 0 && options.skip?.(channel)) return;
      const change = options.parse(channel, message);
      if (change === undefined) return;
      options.onChange?.(change);
      for (const l of listeners) queueMicrotask(() => l(change));
    },
    live() {
      options.onLive?.();
      if (everLive) {
        if (client.status === "ready") announce();
        else if (!announcePending) {
          // one pending announcement, however many times the subscription comes back before the commands do
          announcePending = true;
          cancelAnnounce = whenReady(client as EventEmitter, announce);
        }
      }
      everLive = true;
    },
    lost() {
      options.onLost?.();
    },
  });
  await Promise.race([subscription.firstLive, sleep(options.subscribeTimeoutMs ?? 5000)]);
  everLive = true; // a first confirmation after this point is a comeback: followers may have missed changes

  // Paused while idle. A write publishes its event to every process that follows the pattern, the writer included,
  // and receiving one cost the writer's process ~1.5 µs of a config PUT's ~30 (ioredis decoding the four-part
  // message) even when it then dropped it undecoded; a process with nothing cached and nothing watched needs none.
  let paused = false;
  let idleChecks = 0;
  const idle = options.idle;
  const idleTimer = idle
    ? setInterval(() => {
        if (paused || listeners.size > 0 || !idle()) return void (idleChecks = 0);
        if (++idleChecks < 2) return;
        idleChecks = 0;
        paused = true;
        subscription.pause();
      }, options.idleCheckMs ?? 250).unref()
    : undefined;
  const wake = () => {
    if (!paused) return;
    paused = false;
    // its confirmation comes as `live`: the store trusts its cache again, and followers resync (they may have
    // subscribed, and read, before it)
    subscription.resume();
  };

  return {
    subscribe(listener, onResync) {
      listeners.add(listener);
      if (onResync) resyncs.add(onResync);
      wake();
      return () => {
        listeners.delete(listener);
        if (onResync) resyncs.delete(onResync);
      };
    },
    get followed() {
      return listeners.size > 0;
    },
    wake,
    async close() {
      clearInterval(idleTimer);
      subscription.stop();
      listeners.clear();
      resyncs.clear();
      if (announcePending) cancelAnnounce();
      if (!options.hub) await hub.close();
    },
  };
}
