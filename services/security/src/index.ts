export { createSecurityModule, createSecurityGuard, securityModule, securityGuard, type SecurityModuleOptions } from "./module.js";
export { securitySettings, securityModuleSettings, SECURITY_PORTS, type AuditSelection } from "./settings.js";
export { callerOf, readableNamespaces, mayAccess, principalKey, ADMIN_ROLE, type Principal } from "./principal.js";
export { openSecurityStore } from "./open-store.js";
export { createMemorySecurityStore } from "./store/memory-security-store.js";
export { createRedisSecurityStore } from "./store/redis-security-store.js";
export { csvCell } from "./audit-log.js";
export type { IdSource } from "./ids.js";
export type { SecurityStore, UserRecord, RoleRecord, AuditRecord, Binding, SecurityChange } from "./store/security-store.js";
