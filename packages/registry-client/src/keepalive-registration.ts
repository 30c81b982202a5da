import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { KeepaliveRequestSchema, type KeepaliveResponse, type RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { backoffMs, pause } from "./backoff.js";
import { registerRequestOf, registrationHandle, type Registration, type RegistrationDeps } from "./registration.js";
import type { RegisterOptions, RegistrationState } from "./types.js";

export interface KeepaliveRegistrationDeps extends Omit<RegistrationDeps, "renewEveryMs"> {
  /** A client on a full-duplex transport (HTTP/2: gRPC, or Connect with httpVersion "2"), for the Keepalive stream. */
  keepaliveClient: Client<typeof RegistryService>;
}

/** One open Keepalive stream: its answers, and how to end it. */
interface KeepaliveStream {
  answers: AsyncIterator<KeepaliveResponse>;
  /** Closes our side: the server renews the instance one last time and ends the stream (the graceful way). */
  end(): void;
  /** Cancels the call outright (when the server does not answer the graceful end). */
  cancel(): void;
}

function openStream(client: Client<typeof RegistryService>, register: ReturnType<typeof registerRequestOf>["request"]): KeepaliveStream {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => (end = resolve));
  const cancel = new AbortController();
  // The first message registers; after it our side stays open, sending nothing: the server renews on its own timer.
  async function* requests() {
    yield create(KeepaliveRequestSchema, { register });
    await ended;
  }
  const answers = client.keepalive(requests(), { signal: cancel.signal })[Symbol.asyncIterator]();
  return { answers, end, cancel: () => cancel.abort() };
}

/** The stream's first answer (the registration) within `timeoutMs`, or the reason there is none. */
async function registered(stream: KeepaliveStream, timeoutMs: number): Promise<string> {
  let timedOut = false;
  // as for a renewal's call: a registry that accepts the stream and never answers must not hold register() for ever
  const timer = setTimeout(() => {
    timedOut = true;
    stream.cancel();
  }, timeoutMs);
  try {
    const first = await stream.answers.next();
    if (first.done) throw new ConnectError("the keepalive stream ended before the registration was answered", Code.Unavailable);
    return first.value.instanceId;
  } catch (e) {
    stream.end(); // whatever the failure, leave no half-open stream behind
    if (timedOut) throw new ConnectError(`the registry did not answer the keepalive registration within ${timeoutMs} ms (callTimeoutMs)`, Code.DeadlineExceeded);
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Registers through the Keepalive stream and keeps the stream open instead of renewing on a timer: the server renews
 * the instance while the stream is open and lets it expire one TTL after the stream ends however it ends (this process
 * killed, its connection lost). The first registration's errors reach the caller. When the stream fails later the
 * client opens a new one (which registers the instance again), at once after not_found (the instance was removed
 * while its stream was open), else with backoff, until close(). close() ends the stream gracefully, then deregisters.
 */
export async function startKeepaliveRegistration(deps: KeepaliveRegistrationDeps, options: RegisterOptions): Promise<Registration> {
  const { keepaliveClient, callTimeoutMs, emit } = deps;
  const { request, ttlMs } = registerRequestOf(deps, options);
  const { serviceId } = request;
  let stream = openStream(keepaliveClient, request);
  const instanceId = await registered(stream, callTimeoutMs);
  emit({ type: "registered", instanceId });

  let state: RegistrationState = "registered";
  const stop = new AbortController();

  // The registry renews every third of the ttl and reports each renewal on the stream. It keeps the stream open while
  // its store is unreachable (retrying at each tick), so a silence of two of its intervals means renewals are failing:
  // the state says so, as in renewal mode, until a renewal is reported again.
  const overdueMs = 2 * Math.max(100, Math.floor(ttlMs / 3));
  /** Reads the stream's renewals until it ends; undefined when it ended because close() asked it to. */
  const follow = async (s: KeepaliveStream): Promise<ConnectError | undefined> => {
    let overdue: NodeJS.Timeout | undefined;
    let renewals = 0;
    let ended = false;
    const expectRenewal = () => {
      clearTimeout(overdue);
      const seen = renewals;
      overdue = setTimeout(() => {
        // Decided after this turn's reads (the check phase comes after the poll phase): when this process itself
        // stalled past the timer (a long synchronous task, a GC pause), the renewals that came meanwhile wait unread in
        // its socket — they are read first, and the registry is not blamed for this process's silence.
        setImmediate(() => {
          if (ended || renewals !== seen) return;
          state = "retrying";
          const error = new ConnectError(`the registry has reported no renewal for ${overdueMs} ms (two of its intervals): its store may be unreachable; it keeps trying while the stream is open`, Code.Unavailable);
          emit({ type: "renew-failed", instanceId, error, retryInMs: overdueMs / 2 });
          expectRenewal();
        }).unref();
      }, overdueMs);
      overdue.unref();
    };
    expectRenewal();
    try {
      for (let m = await s.answers.next(); !m.done; m = await s.answers.next()) {
        renewals++;
        expectRenewal();
        state = "registered";
        emit({ type: "renewed", instanceId, ...(m.value.ttlAt ? { ttlAt: timestampDate(m.value.ttlAt) } : {}) });
      }
      return stop.signal.aborted ? undefined : new ConnectError("the registry ended the keepalive stream", Code.Unavailable);
    } catch (e) {
      return stop.signal.aborted ? undefined : ConnectError.from(e);
    } finally {
      ended = true;
      clearTimeout(overdue);
      s.end();
    }
  };

  const loop = (async () => {
    let failures = 0;
    for (let error = await follow(stream); error; error = await follow(stream)) {
      state = "retrying";
      let delay = error.code === Code.NotFound ? 0 : backoffMs(failures++, deps.retry);
      emit({ type: "renew-failed", instanceId, error, retryInMs: delay });
      for (;;) {
        if (!(await pause(delay, stop.signal))) return;
        stream = openStream(keepaliveClient, request);
        try {
          await registered(stream, callTimeoutMs);
          break;
        } catch (e) {
          if (stop.signal.aborted) return;
          delay = backoffMs(failures++, deps.retry);
          emit({ type: "renew-failed", instanceId, error: ConnectError.from(e), retryInMs: delay });
        }
      }
      state = "registered";
      failures = 0;
      emit({ type: "re-registered", instanceId });
      if (stop.signal.aborted) stream.end(); // close() came while the new stream was opening
    }
  })();

  return registrationHandle(deps, { serviceId, instanceId }, () => state, async () => {
    stop.abort();
    stream.end();
    // The server answers the end at once; one that does not within a call's time gets the call cancelled.
    const timer = setTimeout(() => stream.cancel(), callTimeoutMs);
    await loop;
    clearTimeout(timer);
  });
}
