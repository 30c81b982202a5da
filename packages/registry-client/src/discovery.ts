import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { Instance, RegistryService, WatchInstancesResponse } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { backoffMs, pause, type RetryOptions } from "./backoff.js";
import { chooseWeighted } from "./choose-weighted.js";
import { ClientClosedError } from "./errors.js";
import type { RegistryEvent, ServiceInstance } from "./types.js";

export interface DiscoveryDeps {
  client: Client<typeof RegistryService>;
  namespace: string;
  retry: RetryOptions;
  emit: (e: RegistryEvent) => void;
  signal: AbortSignal;
  /** How long the first stream may take to deliver its first answer before the callers waiting for it are failed. */
  firstAnswerMs: number;
}

function toServiceInstance(i: Instance): ServiceInstance {
  return Object.freeze({
    instanceId: i.instanceId,
    serviceId: i.serviceId,
    schema: i.schema,
    host: i.host,
    port: i.port,
    weight: i.weight,
    isEphemeral: i.isEphemeral,
    ...(i.ttlAt ? { ttlAt: timestampDate(i.ttlAt) } : {}),
    metadata: Object.freeze({ ...i.metadata }),
  });
}

/**
 * One service's instances, kept current by the server's WatchInstances stream: the first message ("current") fills
 * the cache, every change updates it, "resync" replaces it. When the stream ends or fails, the cache keeps its last
 * state and the watch reconnects with backoff; the new stream's "current" replaces the cache (the re-read). Nothing
 * polls: in steady state the only traffic is the open stream.
 */
export class ServiceCache {
  /** Sorted by instance id (as the server lists them), frozen; replaced whole on every change. */
  private snapshot: readonly ServiceInstance[] = Object.freeze([]);
  private readonly byId = new Map<string, ServiceInstance>();
  /** Settles with the first "current"; rejects when the first stream fails before it (the caller sees why). */
  readonly ready: Promise<void>;
  private loaded = false;

  /** Whether the first answer arrived (from then on the cache answers without waiting). */
  get isLoaded(): boolean {
    return this.loaded;
  }

  constructor(
    private readonly deps: DiscoveryDeps,
    readonly serviceId: string,
    onFirstFailure: () => void,
  ) {
    this.ready = new Promise<void>((resolve, reject) => {
      // Started a turn later: a transport that throws at once (a header it cannot send) must not call onFirstFailure
      // while the caller is still constructing this cache (it compares the cache with the one it is creating: a
      // ReferenceError then, thrown out of run() as an unhandled rejection that ended the process).
      queueMicrotask(() => {
        this.run(resolve, (e) => {
          onFirstFailure();
          reject(e);
        }).catch(reject);
      });
    });
    this.ready.catch(() => {}); // rejections are handled by whoever awaits it
  }

  get instances(): readonly ServiceInstance[] {
    return this.snapshot;
  }

  choose(random?: () => number): ServiceInstance | undefined {
    return chooseWeighted(this.snapshot, random);
  }

  private replace(instances: Instance[]): void {
    this.byId.clear();
    for (const i of instances) this.byId.set(i.instanceId, toServiceInstance(i));
  }

  private apply(m: WatchInstancesResponse): void {
    switch (m.op) {
      case "current":
      case "resync":
        this.replace(m.instances);
        break;
      case "register":
      case "renew":
      case "metadata":
        if (m.instance) this.byId.set(m.instance.instanceId, toServiceInstance(m.instance));
        break;
      case "deregister":
      case "expired":
        this.byId.delete(m.instanceId);
        break;
      default:
        return; // an op this client does not know yet: ignore it rather than guess
    }
    this.snapshot = Object.freeze([...this.byId.values()].sort((a, b) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0)));
    this.deps.emit({ type: "instances", serviceId: this.serviceId, instances: this.snapshot });
  }

  /**
   * An instance the cache still holds past its ttl by more than this (ms) means the watch has stalled: when the ttl a
   * watcher holds passes, a live registry sends the instance's renewal (announced or not, see watch-instances.ts in the
   * registry) or its expiry within moments. The margin covers that moment and the clocks of this host and the
   * registry's.
   */
  static readonly STALL_MARGIN_MS = 5_000;

  /**
   * When the watch must have said something about the cached instance whose ttl runs out first: undefined when the
   * cache holds no ephemeral instance (a watch of fixed instances may stay silent for ever).
   */
  private newsDueAt(): number | undefined {
    let due: number | undefined;
    for (const i of this.snapshot) if (i.ttlAt && (due === undefined || i.ttlAt.getTime() < due)) due = i.ttlAt.getTime();
    return due === undefined ? undefined : due + ServiceCache.STALL_MARGIN_MS;
  }

  private async run(loaded: () => void, firstFailed: (e: unknown) => void): Promise<void> {
    const { client, namespace, signal, firstAnswerMs } = this.deps;
    let failures = 0;
    while (!signal.aborted) {
      let error: ConnectError;
      // The first stream gets firstAnswerMs to answer: a registry that accepts the connection and never answers (a
      // stalled proxy) must fail the callers waiting on instances(), not hold them for ever.
      const first = this.loaded ? undefined : new AbortController();
      const timer = first && setTimeout(() => first.abort(), firstAnswerMs);
      // A stream that has gone quiet while an instance it should have renewed or expired is past its ttl (a frozen
      // registry, a half-open connection) is given up and opened again; the cache keeps serving its last state
      // meanwhile (a registry outage must not take discovery down) and `watch-failed` says so.
      const stall = new AbortController();
      let stallTimer: NodeJS.Timeout | undefined;
      let stalledOn: ServiceInstance | undefined;
      const watchForStall = (notBefore: number) => {
        clearTimeout(stallTimer);
        const due = this.newsDueAt();
        if (due === undefined) return;
        stallTimer = setTimeout(() => {
          stalledOn = this.snapshot.find((i) => i.ttlAt && i.ttlAt.getTime() + ServiceCache.STALL_MARGIN_MS <= Date.now());
          if (stalledOn) stall.abort();
          else watchForStall(0); // news came (or the timer fired early): watch again
        }, Math.max(due, notBefore) - Date.now());
        stallTimer.unref();
      };
      // a new stream gets a margin of its own to deliver its first message before its cache counts as stale
      if (this.loaded) watchForStall(Date.now() + ServiceCache.STALL_MARGIN_MS);
      try {
        const signals = [signal, stall.signal, ...(first ? [first.signal] : [])];
        for await (const m of client.watchInstances({ namespace, serviceId: this.serviceId }, { signal: AbortSignal.any(signals) })) {
          this.apply(m);
          watchForStall(0);
          failures = 0;
          if (!this.loaded) {
            this.loaded = true;
            clearTimeout(timer);
            loaded();
          }
        }
        error = new ConnectError("the watch stream ended (server shutting down?)");
      } catch (e) {
        // closed while the first answer was awaited: its callers are told so (they would otherwise wait for ever)
        if (signal.aborted) return this.loaded ? undefined : firstFailed(new ClientClosedError());
        if (!this.loaded && first?.signal.aborted) {
          return firstFailed(new ConnectError(`the registry did not answer the watch of ${this.serviceId} within ${firstAnswerMs} ms (callTimeoutMs)`, Code.DeadlineExceeded));
        }
        if (!this.loaded) return firstFailed(e);
        error = stalledOn
          ? new ConnectError(
              `the watch stalled: no news of instance ${stalledOn.instanceId}, over ${ServiceCache.STALL_MARGIN_MS / 1000} s past its ttl (${stalledOn.ttlAt!.toISOString()}); reopening it, the cache keeps its last state until then`,
              Code.DeadlineExceeded,
            )
          : ConnectError.from(e);
      } finally {
        clearTimeout(timer);
        clearTimeout(stallTimer);
      }
      if (!this.loaded) return firstFailed(error);
      const retryInMs = backoffMs(failures++, this.deps.retry);
      this.deps.emit({ type: "watch-failed", serviceId: this.serviceId, error, retryInMs });
      await pause(retryInMs, signal);
    }
    // closed before the first stream was opened (close() in the same turn as the first call): its callers are told so
    if (!this.loaded) firstFailed(new ClientClosedError());
  }
}
