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
  return {
    subscribe(listener, onResync) {
      listeners.add(listener);
      if (onResync) resyncs.add(onResync);
      return () => {
        listeners.delete(listener);
        if (onResync) resyncs.delete(onResync);
      };
    },
    get followed() {
      return listeners.size > 0;
    },
    async close() {
      subscription.stop();
      listeners.clear();
      resyncs.clear();
      if (announcePending) cancelAnnounce();
      if (!options.hub) await hub.close();
    },
  };
}
