/**
 * Thrown by a store adapter when its backing store cannot be reached (connection refused, closed, timed out).
 * Services answer it with `unavailable` (HTTP 503); any other unexpected error is a bug (`internal`).
 *
 * Defined here, in the lowest package a store adapter reaches, so that this package can raise it and
 * `@gov/service-kit` (which opens the process's Redis client) can map it without a dependency cycle;
 * `@gov/service-kit` re-exports it, which is where services import it from.
 */
export class StoreUnavailableError extends Error {
  override readonly name: string = "StoreUnavailableError";
}
