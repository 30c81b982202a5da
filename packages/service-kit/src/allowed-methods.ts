import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import FindMyWay, { type HTTPMethod } from "find-my-way";
import { excerpt } from "./excerpt.js";

/** The body of every 405 (contract §3: `unimplemented`, naming what is allowed); `path` is quoted as an excerpt. */
export const wrongMethodBody = (method: string, path: string, allow: readonly string[]) => ({
  code: "unimplemented",
  message: `${method} is not allowed on ${excerpt(path)}: use ${allow.join(", ")}`,
});

/**
 * The methods each registered path answers, so that a wrong method on a known path is a 405 with `Allow` rather than
 * a 404. Matched with find-my-way, Fastify's own router, so "known path" means exactly what Fastify routes. Install it
 * before the routes are added (it learns them from the onRoute hook).
 */
export function allowedMethods(app: FastifyInstance): (path: string) => string[] {
  const routes: { methods: string[]; url: string }[] = [];
  app.addHook("onRoute", (route) => {
    const url = route.url ?? route.path;
    const methods = ([] as string[]).concat(route.method);
    // CORS answers preflights with `OPTIONS *` (gov.cors.origins): a route for every path, which makes none known
    if ((url === "*" || url === "/*") && methods.every((m) => m === "OPTIONS")) return;
    routes.push({ methods, url });
  });
  let router: ReturnType<typeof FindMyWay> | undefined;
  let methods: string[] = [];
  return (path) => {
    if (!router) {
      router = FindMyWay({ maxParamLength: 2048 });
      const all = new Set<string>();
      for (const r of routes) {
        for (const m of r.methods) {
          all.add(m);
          try {
            router.on(m as HTTPMethod, r.url, () => undefined);
          } catch {
            // the same method and path registered twice (e.g. HEAD beside GET): once is enough
          }
        }
      }
      methods = [...all];
    }
    const found = router;
    return methods.filter((m) => found.find(m as HTTPMethod, path) !== null);
  };
}

/** A trailing or doubled `/` (not the root itself). */
export const hasEmptySegment = (path: string) => path.length > 1 && (path.endsWith("/") || path.includes("//"));

/**
 * For a listener's not-found handler: answers a wrong method on a known path with 405, `Allow` and {@link wrongMethodBody},
 * and says whether it did. Install it (it calls {@link allowedMethods}) before the routes are added.
 */
export function wrongMethodRefuser(app: FastifyInstance): (req: FastifyRequest, reply: FastifyReply) => boolean {
  const allowed = allowedMethods(app);
  return (req, reply) => {
    const path = req.url.split("?")[0];
    // `…/instances/` matches the route of one instance with an empty id: a 405 "use DELETE" would mislead a client
    // that meant `…/instances`. A path with an empty segment is no known path.
    if (hasEmptySegment(path)) return false;
    const allow = allowed(path);
    if (allow.length === 0) return false;
    void reply.status(405).header("allow", allow.join(", ")).send(wrongMethodBody(req.method, path, allow));
    return true;
  };
}
