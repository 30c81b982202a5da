// Moved to @gov/service-kit (every service process needs them, not only the gateway); kept so old imports work.
export { inProcessTransport, remoteTransport, type LocalService, type RemoteTransportOptions } from "@gov/service-kit";
