// Public API of @gov/idgen-monitor: what a process needs to serve the ID generator's health, endpoints and metrics.
export { startIdgenMonitor, type IdgenMonitor, type MonitorOptions } from "./monitor.js";
export { monitorSettings, idgenConfigFromSources, MONITOR_ENDPOINTS, type MonitorEndpoint } from "./settings.js";
export { managementAuthorizer, type AuthorizeManagement, type ManagementRole } from "./authorize.js";
export { machineIdHealth, idgenReadiness, idgenStopped, type ComponentHealth } from "./health.js";
export { registerIdgenMetrics, IDGEN_METRIC_NAMES } from "./metrics.js";
export { mountIdgenEndpoints, MAX_COUNT, type EndpointOptions } from "./endpoints.js";
export { issueRequestIds, requestIdFromHeader, IdsUnavailableError, idsUnavailableMessage } from "./request-ids.js";
