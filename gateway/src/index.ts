export { buildGateway, type GatewayOptions } from "./app.js";
export { gatewaySettings } from "./settings.js";
export { restGateway } from "./rest-gateway.js";
export { toRestError, codeName } from "./errors.js";
export { restRoutesOf, type RestRoute } from "./transcode/rest-routes.js";
