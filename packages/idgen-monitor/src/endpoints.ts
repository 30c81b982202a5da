import { IdGenError, SHARE, type IdGen, type IdGenerator } from "@gov/idgen";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AuthorizeManagement } from "./authorize.js";
import { idsUnavailableMessage } from "./request-ids.js";
import type { MonitorEndpoint } from "./settings.js";

/** Most ids one operation call returns (`?count=`): bounded before any work. */
export const MAX_COUNT = 1000;

export interface EndpointOptions {
  idgen: IdGen;
  exposure: readonly MonitorEndpoint[];
  deleteEnabled: boolean;
  authorize: AuthorizeManagement;
}

type Params = { name?: string };

const refuse = (reply: FastifyReply, status: number, code: string, message: string) => reply.status(status).type("application/json").send({ code, message });

/** 401 without credentials that mean anything, 403 for a known caller who is not an admin; true when the caller is an admin. */
async function requireAdmin(req: FastifyRequest, reply: FastifyReply, authorize: AuthorizeManagement): Promise<boolean> {
  const role = await authorize(req.headers.authorization);
  if (role === "admin") return true;
  if (role === undefined) {
    void reply.header("www-authenticate", 'Bearer realm="management"');
    void refuse(reply, 401, "unauthenticated", "this management operation needs credentials: send `Authorization: Bearer <management.token>` or an admin's access token");
  } else {
    void refuse(reply, 403, "permission_denied", "this management operation is for admins only: use an admin's access token or `management.token`");
  }
  return false;
}

function parseCount(raw: unknown): number | string {
  if (raw === undefined) return 1;
  const n = typeof raw === "string" && /^\d{1,4}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= MAX_COUNT)) return `count must be a whole number from 1 to ${MAX_COUNT}`;
  return n;
}

/**
 * The idgen endpoints of seed Area C on the management listener (`/actuator/...`):
 * - `GET /actuator/idgen`, `GET /actuator/idgen/{name}` (404 unknown), `DELETE /actuator/idgen/{name}` (admin, only
 *   with `idgen.actuator.delete.enabled=true`, else 405) — when `idgen` is exposed;
 * - `GET /actuator/idgenGenerator[/{name}][?count=n]` and `/actuator/idgenStringGenerator[...]` — only when listed in
 *   the exposure setting, and only for admins (401/403).
 * An endpoint that is not exposed has no route: the listener's 404 answers.
 */
export function mountIdgenEndpoints(app: FastifyInstance, o: EndpointOptions): void {
  const { registry } = o.idgen;
  const notFound = (reply: FastifyReply, name: string) =>
    refuse(reply, 404, "not_found", `no ID generator named "${name.slice(0, 120)}" in this process: GET /actuator/idgen lists them (${registry.names().join(", ")})`);

  if (o.exposure.includes("idgen")) {
    app.get("/actuator/idgen", async () => registry.list());
    app.get<{ Params: Params }>("/actuator/idgen/:name", async (req, reply) => {
      const name = req.params.name!;
      return registry.find(name) ? registry.describe(name) : notFound(reply, name);
    });
    app.delete<{ Params: Params }>("/actuator/idgen/:name", async (req, reply) => {
      if (!o.deleteEnabled) {
        void reply.header("allow", "GET");
        return refuse(reply, 405, "unimplemented", "removing a generator is switched off: set idgen.actuator.delete.enabled=true to allow DELETE /actuator/idgen/{name}");
      }
      if (!(await requireAdmin(req, reply, o.authorize))) return reply;
      const name = req.params.name!;
      if (!registry.find(name)) return notFound(reply, name);
      // stops that generator's timers and prefetch; the machine-id lease is shared by the others and stays
      return registry.remove(name);
    });
  }

  /** The generator's next id (or its text) that waits for a prefetch or a clock, when the generator can wait. */
  const waitingNext = (g: IdGenerator, numeric: boolean): (() => Promise<bigint | number | string>) | undefined => {
    const waits = g as IdGenerator & { nextIdAsync?: () => Promise<bigint | number>; converter?: { asString(id: bigint | number): string } };
    const nextIdAsync = waits.nextIdAsync?.bind(g);
    if (!nextIdAsync) return undefined;
    if (numeric) return nextIdAsync;
    const converter = waits.converter;
    return converter ? async () => converter.asString(await nextIdAsync()) : undefined;
  };
  const operation = (path: string, numeric: boolean, produce: (g: IdGenerator, name: string, reply: FastifyReply) => (() => string | bigint | number) | undefined) => {
    const handler = async (req: FastifyRequest<{ Params: Params; Querystring: { count?: string } }>, reply: FastifyReply) => {
      if (!(await requireAdmin(req, reply, o.authorize))) return reply;
      const count = parseCount(req.query.count);
      if (typeof count === "string") return refuse(reply, 400, "invalid_argument", count);
      const name = req.params.name ?? SHARE;
      const generator = registry.find(name);
      if (!generator) return notFound(reply, name);
      const next = produce(generator, name, reply);
      if (!next) return reply;
      // A segment chain that ran dry, or a clock that stepped back, makes nextId() refuse at once rather than block;
      // an operation can wait, as nextIdAsync() does (a count of 1000 is more than a chain of step 10 holds) — for
      // string ids too, through the generator's converter (they were answered 503 while Redis was healthy).
      const later = waitingNext(generator, numeric);
      try {
        const ids: string[] = [];
        for (let i = 0; i < count; i++) {
          try {
            ids.push(String(next()));
          } catch (err) {
            if (!later || !(err instanceof IdGenError) || (err.code !== "SEGMENT_EXHAUSTED" && err.code !== "CLOCK_BACKWARDS")) throw err;
            ids.push(String(await later()));
          }
        }
        // one id: the bare JSON string (64-bit ids do not fit a JSON number); with ?count=: an array of them
        return req.query.count === undefined ? reply.type("application/json").send(JSON.stringify(ids[0])) : ids;
      } catch (err) {
        if (!(err instanceof IdGenError)) throw err;
        return refuse(reply, 503, "unavailable", idsUnavailableMessage(err));
      }
    };
    app.get(`/actuator/${path}`, handler);
    app.get(`/actuator/${path}/:name`, handler);
  };
  if (o.exposure.includes("idgenGenerator")) {
    operation("idgenGenerator", true, (g, name, reply) => {
      if (g.nextId) return () => g.nextId!();
      void refuse(reply, 400, "invalid_argument", `generator "${name}" issues string ids only: use /actuator/idgenStringGenerator/${name}`);
      return undefined;
    });
  }
  if (o.exposure.includes("idgenStringGenerator")) operation("idgenStringGenerator", false, (g) => () => g.nextIdAsString());
}
