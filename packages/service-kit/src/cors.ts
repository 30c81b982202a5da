import { cors as connectCors } from "@connectrpc/connect";
import fastifyCors from "@fastify/cors";
import type { SettingDef } from "@gov/settings";
import type { FastifyInstance } from "fastify";

/**
 * `gov.cors.origins` (contract §3): the browser origins allowed to call REST, Connect and gRPC-Web. Off by default;
 * a comma-separated list (the settings loader joins a YAML list with commas) of `scheme://host[:port]`, or `*` for any.
 */
export function parseCorsOrigins(raw: string): string[] {
  const items = raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  for (const item of items) {
    if (item === "*") continue;
    let url: URL | undefined;
    try {
      url = new URL(item);
    } catch {
      url = undefined;
    }
    // An origin is exactly scheme://host[:port]: a browser's Origin header never has a path or a trailing slash.
    if (!url || !/^https?:$/.test(url.protocol) || url.origin !== item) {
      throw new Error(`"${item}" is not an origin: write scheme://host[:port] with no path or trailing slash (e.g. https://app.example.com), or * for any origin`);
    }
  }
  return items.includes("*") ? ["*"] : items;
}

export const corsSettings = {
  corsOrigins: {
    name: "gov.cors.origins",
    parse: parseCorsOrigins,
    default: [],
    doc: "browser origins allowed to call REST, Connect and gRPC-Web (CORS), comma-separated `scheme://host[:port]`, or `*` for any; none by default (CORS off)",
  } as SettingDef<string[]>,
};

// What browsers must be allowed to send and read: Connect's and gRPC-Web's protocol headers (as connect-es lists them)
// and ours: Authorization for the coming auth, If-None-Match/ETag for config GETs, Last-Event-ID for SSE watches,
// Content-Disposition for the export's file name.
// X-Gov-Consumer(-Namespace): a browser app that discovers a service says who it is (the topology), like any client.
const ALLOWED_HEADERS = [...new Set([...connectCors.allowedHeaders, "Authorization", "If-None-Match", "Last-Event-ID", "Content-Encoding", "Accept-Encoding", "X-Gov-Consumer", "X-Gov-Consumer-Namespace"])];
const EXPOSED_HEADERS = [...connectCors.exposedHeaders, "ETag", "Content-Disposition"];
const ALLOWED_METHODS = [...new Set([...connectCors.allowedMethods, "GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"])];

/**
 * Answers CORS preflights and adds the CORS headers for the given origins, on every route of `app` (REST, Connect,
 * gRPC-Web). With no origins nothing is registered, so requests pay nothing when CORS is off.
 */
export async function registerCors(app: FastifyInstance, origins: readonly string[]): Promise<void> {
  if (origins.length === 0) return;
  await app.register(fastifyCors, {
    // "*" answers any origin with `*`; a list reflects the request's Origin when it is listed (and adds Vary: Origin).
    origin: origins.includes("*") ? "*" : [...origins],
    methods: ALLOWED_METHODS,
    allowedHeaders: ALLOWED_HEADERS,
    exposedHeaders: EXPOSED_HEADERS,
    // Browsers cache a preflight this long (Chrome caps it at 2 h), instead of one OPTIONS per call.
    maxAge: 7200,
  });
}
