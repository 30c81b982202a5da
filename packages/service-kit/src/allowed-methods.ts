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
  return methodsOfPaths(app).allowed;
}

/**
 * {@link allowedMethods}, and `extends(method, path)`: whether `path` is a proper prefix, ending in a path variable, of
 * a path the method is routed on (`PUT …/instances/order@http` of `PUT …/instances/{id}/renew`): what a client sends
 * when its URL held a raw `#`, where everything after it is a fragment and never leaves the client.
 */
function methodsOfPaths(app: FastifyInstance): { allowed: (path: string) => string[]; extends: (method: string, path: string) => boolean } {
  const routes: { methods: string[]; url: string }[] = [];
  app.addHook("onRoute", (route) => {
    const url = route.url ?? route.path;
    const methods = ([] as string[]).concat(route.method);
    // CORS answers preflights with `OPTIONS *` (gov.cors.origins): a route for every path, which makes none known
    if ((url === "*" || url === "/*") && methods.every((m) => m === "OPTIONS")) return;
    routes.push({ methods, url });
  });
  let router: ReturnType<typeof FindMyWay> | undefined;
  let prefixes: ReturnType<typeof FindMyWay> | undefined;
  let methods: string[] = [];
  const on = (r: ReturnType<typeof FindMyWay>, method: string, url: string) => {
    try {
      r.on(method as HTTPMethod, url, () => undefined);
    } catch {
      // the same method and path registered twice (e.g. HEAD beside GET): once is enough
    }
  };
  // Built on first use, once every route is known.
  const build = () => {
    router = FindMyWay({ maxParamLength: 2048 });
    prefixes = FindMyWay({ maxParamLength: 2048 });
    const all = new Set<string>();
    for (const r of routes) {
      for (const m of r.methods) {
        all.add(m);
        on(router, m, r.url);
        // only prefixes that end in a variable: a "#" cuts a URL inside an id, never at a fixed segment
        const segments = r.url.split("/");
        for (let n = 2; n < segments.length; n++) if (segments[n - 1].startsWith(":")) on(prefixes, m, segments.slice(0, n).join("/"));
      }
    }
    methods = [...all];
  };
  return {
    allowed: (path) => {
      if (!router) build();
      const found = router!;
      return methods.filter((m) => found.find(m as HTTPMethod, path) !== null);
    },
    extends: (method, path) => {
      if (!prefixes) build();
      return methods.includes(method) && prefixes!.find(method as HTTPMethod, path) !== null;
    },
  };
}

/** A trailing or doubled `/` (not the root itself). */
export const hasEmptySegment = (path: string) => path.length > 1 && (path.endsWith("/") || path.includes("//"));

/**
 * For a listener's not-found handler: answers a wrong method on a known path with 405, `Allow` and {@link wrongMethodBody},
 * and says whether it did. Install it (it calls {@link allowedMethods}) before the routes are added.
 */
export function wrongMethodRefuser(app: FastifyInstance): (req: FastifyRequest, reply: FastifyReply) => boolean {
  const paths = methodsOfPaths(app);
  return (req, reply) => {
    const path = req.url.split("?")[0];
    // `…/instances/` matches the route of one instance with an empty id: a 405 "use DELETE" would mislead a client
    // that meant `…/instances`. A path with an empty segment is no known path.
    if (hasEmptySegment(path)) return false;
    const allow = paths.allowed(path);
    if (allow.length === 0) return false;
    const body = wrongMethodBody(req.method, path, allow);
    if (paths.extends(req.method, path)) body.message += `; ${req.method} is taken on longer paths under it: if the URL held a "#", everything from it on was not sent (a client cuts a URL there): send # as %23`;
    void reply.status(405).header("allow", allow.join(", ")).send(body);
    return true;
  };
}
