export { checkNamespace, type NamespaceRule } from "./namespace.js";
export { StoreUnavailableError, errorInterceptor, toConnectError } from "./errors.js";
export { createLogger, type Logger } from "./logger.js";
export { createH2cServer, serveConnect, type ConnectRoutesOptions, type ServeConnectOptions, type ConnectServer } from "./serve-connect.js";
export { sharedSettings } from "./shared-settings.js";
