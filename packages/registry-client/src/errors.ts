/**
 * Errors the client raises on purpose; all extend {@link RegistryClientError}. Errors the server answers (a bad
 * namespace, an invalid registration) reach the caller unchanged as Connect's `ConnectError`, with the server's
 * message saying what to fix.
 */

/** Base class of every error raised by this library. */
export class RegistryClientError extends Error {
  override name = "RegistryClientError";
}

/** `choose()` found no live instance of weight above 0 in the cache. */
export class NoInstanceError extends RegistryClientError {
  override name = "NoInstanceError";
  constructor(
    readonly namespace: string,
    readonly serviceId: string,
  ) {
    super(`service "${serviceId}" has no live instance of weight above 0 in namespace "${namespace}"`);
  }
}

/** The client was closed: it no longer registers or discovers. */
export class ClientClosedError extends RegistryClientError {
  override name = "ClientClosedError";
  constructor() {
    super("the registry client is closed: create a new one");
  }
}

/**
 * `register()` of an instance this client already keeps (same service, schema, host and port): a second renewal loop
 * would bring it back after the first Registration's close() deregistered it. Nothing was sent.
 */
export class AlreadyRegisteredError extends RegistryClientError {
  override name = "AlreadyRegisteredError";
  constructor(readonly instanceId: string) {
    super(`instance "${instanceId}" is already registered by this client: keep using its Registration (to change its metadata or weight, close() it and register again)`);
  }
}
