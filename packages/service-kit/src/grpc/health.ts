import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "@gov/api/gen/health/v1/health_pb";
import { excerpt } from "../excerpt.js";

/** Whether the process serves: the process runner passes its readiness (DOWN while the store is gone or at shutdown). */
export interface ServingState {
  serving(): boolean;
  /** Calls `listener` after each change of `serving()`; returns the unsubscribe function. */
  subscribe(listener: () => void): () => void;
}

/** For listeners that were given no readiness: always SERVING. */
export const alwaysServing: ServingState = { serving: () => true, subscribe: () => () => {} };

/**
 * grpc.health.v1.Health, as Kubernetes gRPC probes, Envoy and grpc-health-probe use it. `""` (the whole server) and
 * every served service share one status, the process's readiness. Watch streams each change and ends, cleanly, when
 * `closing` aborts (the listener shuts down), so probes reconnect instead of holding the process open.
 */
export function healthRoutes(serviceNames: readonly string[], state: ServingState, closing: AbortSignal): (router: ConnectRouter) => void {
  const known = new Set(["", ...serviceNames]);
  const statusOf = (service: string) => (!known.has(service) ? Status.SERVICE_UNKNOWN : state.serving() ? Status.SERVING : Status.NOT_SERVING);
  return (router) =>
    router.service(Health, {
      check(req) {
        if (!known.has(req.service)) {
          throw new ConnectError(`service "${excerpt(req.service)}" is not served here: ask for "" (the whole server) or one of ${[...known].filter(Boolean).join(", ")}`, Code.NotFound);
        }
        return { status: statusOf(req.service) };
      },
      list() {
        return { statuses: Object.fromEntries([...known].map((name) => [name, { status: statusOf(name) }])) };
      },
      async *watch(req, ctx) {
        const changed = changes(state, AbortSignal.any([ctx.signal, closing]));
        let last: Status | undefined;
        for (;;) {
          const now = statusOf(req.service);
          if (now !== last) yield { status: (last = now) };
          if (!(await changed.next())) return;
        }
      },
    });
}

/** `next()` resolves true after the state changes, false once `signal` aborts (then it stays false). */
function changes(state: ServingState, signal: AbortSignal): { next(): Promise<boolean> } {
  let pending = false;
  let wake: ((more: boolean) => void) | undefined;
  const unsubscribe = state.subscribe(() => {
    pending = true;
    wake?.(true);
  });
  const stop = () => {
    unsubscribe();
    wake?.(false);
  };
  if (signal.aborted) stop();
  else signal.addEventListener("abort", stop, { once: true });
  return {
    next() {
      if (signal.aborted) return Promise.resolve(false);
      if (pending) {
        pending = false;
        return Promise.resolve(true);
      }
      return new Promise<boolean>((resolve) => {
        wake = (more) => {
          wake = undefined;
          pending = false;
          resolve(more);
        };
      });
    },
  };
}
