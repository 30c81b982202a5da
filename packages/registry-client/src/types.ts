import type { ConnectError } from "@connectrpc/connect";

/** A live instance as the registry knows it (a plain, frozen object). */
export interface ServiceInstance {
  /** `{serviceId}@{schema}#{host}#{port}`, e.g. order@http#10.0.0.1#8080. */
  readonly instanceId: string;
  readonly serviceId: string;
  readonly schema: string;
  readonly host: string;
  readonly port: number;
  /** Share of `choose()`; 0 is never chosen. */
  readonly weight: number;
  readonly isEphemeral: boolean;
  /** When it expires unless renewed (server clock); absent for a fixed instance. */
  readonly ttlAt?: Date;
  readonly metadata: Readonly<Record<string, string>>;
}

/** What `register()` sends. */
export interface RegisterOptions {
  /** Default: the client's own `serviceId`. */
  serviceId?: string;
  /** A URI scheme: http, https, grpc … */
  schema: string;
  host: string;
  port: number;
  /** 0 or more (default 1 on the server). */
  weight?: number;
  /** String values; keys must not start with `_`. */
  metadata?: Record<string, string>;
  /** How long the instance lives without renewal, ms (1 s – 24 h). Default: the client's `ttlMs`. */
  ttlMs?: number;
}

/** How a registration is doing. */
export type RegistrationState = "registered" | "retrying" | "closed";

/** What the client reports through `on()`. */
export type RegistryEvent =
  | { type: "registered"; instanceId: string }
  | { type: "renewed"; instanceId: string; ttlAt?: Date }
  /** A renewal (or a re-registration) failed; the next attempt follows in `retryInMs` (0: re-registering now, after not_found). */
  | { type: "renew-failed"; instanceId: string; error: ConnectError; retryInMs: number }
  /** The server no longer knew the instance (expired or removed) and the client registered it again. */
  | { type: "re-registered"; instanceId: string }
  | { type: "deregistered"; instanceId: string }
  /** The cache of a service changed (a watch message arrived). */
  | { type: "instances"; serviceId: string; instances: readonly ServiceInstance[] }
  /** A service's watch stream ended or failed; the cache keeps its last state and the watch reconnects in `retryInMs`. */
  | { type: "watch-failed"; serviceId: string; error: ConnectError; retryInMs: number };
