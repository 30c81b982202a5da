import { create } from "@bufbuild/protobuf";
import { DurationSchema, timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { backoffMs, pause, type RetryOptions } from "./backoff.js";
import type { RegisterOptions, RegistrationState, RegistryEvent } from "./types.js";

export interface RegistrationDeps {
  client: Client<typeof RegistryService>;
  namespace: string;
  serviceId: string;
  ttlMs: number;
  renewEveryMs: number | undefined;
  callTimeoutMs: number;
  retry: RetryOptions;
  emit: (e: RegistryEvent) => void;
}

/** One registered instance, renewed until `close()`. */
export interface Registration {
  readonly instanceId: string;
  readonly serviceId: string;
  /** "registered" after each successful renewal, "retrying" while renewals fail, "closed" after close(). */
  readonly state: RegistrationState;
  /** Stops renewing and deregisters the instance (not_found — already gone — counts as done). */
  close(): Promise<void>;
}

const INT32_MAX = 2 ** 31 - 1;

/**
 * What protobuf cannot carry is refused here, as the server refuses what it can carry but does not take: a port of
 * 80.5 or a weight of 2^40 would otherwise fail to serialize, reported as the client's own `internal` error, and a
 * metadata value that is not a string would be sent as its text ("[object Object]") instead of refused.
 */
function checkInt32(name: string, value: number | undefined): void {
  if (value !== undefined && !(Number.isInteger(value) && Math.abs(value) <= INT32_MAX)) {
    throw new ConnectError(`${name} must be a whole number of at most ${INT32_MAX}, not ${value}`, Code.InvalidArgument);
  }
}

function checkMetadata(metadata: Record<string, string> | undefined): void {
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (typeof value !== "string") {
      throw new ConnectError(`metadata value of ${JSON.stringify(key)} is ${value === null ? "null" : `a ${typeof value}`}: metadata values are strings, so quote it`, Code.InvalidArgument);
    }
  }
}

/**
 * The renewal interval of a registration: given, or a third of the TTL (two more chances before expiry). One not
 * shorter than the TTL would let the instance expire between renewals, over and over.
 */
function renewIntervalOf(renewEveryMs: number | undefined, ttlMs: number): number {
  if (renewEveryMs === undefined) return Math.max(1, Math.floor(ttlMs / 3));
  if (!(renewEveryMs > 0 && renewEveryMs < ttlMs)) {
    throw new ConnectError(`renewEveryMs ${renewEveryMs} must be above 0 and below the TTL (${ttlMs} ms), or the instance expires between renewals: leave it out for a third of the TTL`, Code.InvalidArgument);
  }
  return renewEveryMs;
}

/** What RegisterInstance (and the first keepalive message) sends for `options`, and the TTL it asks for. */
export function registerRequestOf(deps: Pick<RegistrationDeps, "namespace" | "serviceId" | "ttlMs">, options: RegisterOptions) {
  const ttlMs = options.ttlMs ?? deps.ttlMs;
  checkInt32("port", options.port);
  checkInt32("weight", options.weight);
  if (!Number.isSafeInteger(ttlMs)) throw new ConnectError(`ttlMs must be a whole number, not ${ttlMs}`, Code.InvalidArgument);
  checkMetadata(options.metadata);
  const request = {
    namespace: deps.namespace,
    serviceId: options.serviceId ?? deps.serviceId,
    schema: options.schema,
    host: options.host,
    port: options.port,
    weight: options.weight,
    metadata: options.metadata ?? {},
    // Sent explicitly so that the client knows when to renew (the register answer does not carry the TTL).
    ttl: create(DurationSchema, { seconds: BigInt(Math.floor(ttlMs / 1000)), nanos: (ttlMs % 1000) * 1_000_000 }),
  };
  return { request, ttlMs };
}

/** Deregisters; not_found (already gone: expired, or removed by someone else) counts as done. */
export async function deregister(client: Client<typeof RegistryService>, target: { namespace: string; serviceId: string; instanceId: string }, timeoutMs: number): Promise<void> {
  try {
    await client.deregisterInstance(target, { timeoutMs });
  } catch (e) {
    if (ConnectError.from(e).code !== Code.NotFound) throw e;
  }
}

/**
 * Registers once (errors reach the caller), then renews in one sequential loop — so renewals never overlap — every
 * `renewEveryMs` (default a third of the TTL, leaving two more chances before expiry). not_found from a renewal means
 * the server no longer has the instance (it expired or was removed): register again at once. Any other failure
 * (unavailable, a timeout …) is retried with backoff until close().
 */
export async function startRegistration(deps: RegistrationDeps, options: RegisterOptions): Promise<Registration> {
  const { client, namespace, callTimeoutMs, emit } = deps;
  const { request, ttlMs } = registerRequestOf(deps, options);
  const { serviceId } = request;
  const renewEveryMs = renewIntervalOf(deps.renewEveryMs, ttlMs);
  const { instanceId } = await client.registerInstance(request, { timeoutMs: callTimeoutMs });
  emit({ type: "registered", instanceId });

  let state: RegistrationState = "registered";
  const stop = new AbortController();
  const callTimeout = Math.min(callTimeoutMs, Math.max(renewEveryMs, 1_000));

  const loop = (async () => {
    let reregister = false;
    let failures = 0;
    let delay = renewEveryMs;
    while (await pause(delay, stop.signal)) {
      try {
        if (reregister) {
          await client.registerInstance(request, { timeoutMs: callTimeout, signal: stop.signal });
          reregister = false;
          emit({ type: "re-registered", instanceId });
        } else {
          const r = await client.renewInstance({ namespace, serviceId, instanceId }, { timeoutMs: callTimeout, signal: stop.signal });
          emit({ type: "renewed", instanceId, ...(r.ttlAt ? { ttlAt: timestampDate(r.ttlAt) } : {}) });
        }
        state = "registered";
        failures = 0;
        delay = renewEveryMs;
      } catch (e) {
        if (stop.signal.aborted) break;
        const error = ConnectError.from(e);
        state = "retrying";
        if (!reregister && error.code === Code.NotFound) {
          reregister = true;
          delay = 0;
        } else {
          delay = backoffMs(failures++, deps.retry);
        }
        emit({ type: "renew-failed", instanceId, error, retryInMs: delay });
      }
    }
  })();

  return registrationHandle(deps, { serviceId, instanceId }, () => state, async () => {
    stop.abort();
    await loop;
  });
}

/**
 * The Registration handed to the caller, however the instance is kept alive: `stopKeeping` stops that (and waits for
 * it); close() then deregisters the instance, once, however many times it is called.
 */
export function registrationHandle(
  deps: Pick<RegistrationDeps, "client" | "namespace" | "callTimeoutMs" | "emit">,
  ids: { serviceId: string; instanceId: string },
  state: () => RegistrationState,
  stopKeeping: () => Promise<void>,
): Registration {
  let closing: Promise<void> | undefined;
  let closed = false;
  return {
    ...ids,
    get state() {
      return closed ? "closed" : state();
    },
    close() {
      closing ??= (async () => {
        await stopKeeping();
        closed = true;
        await deregister(deps.client, { namespace: deps.namespace, ...ids }, deps.callTimeoutMs);
        deps.emit({ type: "deregistered", instanceId: ids.instanceId });
      })();
      return closing;
    },
  };
}
