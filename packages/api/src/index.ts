// The API as generated from proto/ (single source of truth). Regenerate with `npm run generate`.
export * from "./gen/gov/config/v1/config_pb.js";
export * from "./gen/gov/registry/v1/registry_pb.js";
export * from "./gen/gov/stats/v1/stats_pb.js";
export * from "./gen/gov/stats/v1/namespace_pb.js";
export { http } from "./gen/google/api/annotations_pb.js";
export { type HttpRule } from "./gen/google/api/http_pb.js";
export { type HttpBody, HttpBodySchema } from "./gen/google/api/httpbody_pb.js";
