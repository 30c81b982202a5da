export { createRegistryClient, type RegistryClient, type RegistryClientOptions } from "./registry-client.js";
export type { Registration } from "./registration.js";
export type { RegisterOptions, RegistrationState, RegistryEvent, ServiceInstance } from "./types.js";
export { RegistryClientError, NoInstanceError, ClientClosedError, AlreadyRegisteredError } from "./errors.js";
export { toNamespace } from "./namespace.js";
export { chooseWeighted } from "./choose-weighted.js";
export { withConsumerHeader, CONSUMER_HEADER } from "./consumer-header.js";
export { withAccessToken, type AccessTokenSource } from "./access-token.js";
export type { RetryOptions } from "./backoff.js";
