import { ClockTooManyBackwardsException, IdGenError, MachineIdLostException, SHARE, type IdGen, type IdGenerator } from "@gov/idgen";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AuthorizeManagement } from "./authorize.js";
import { behindPastThreshold, leaseStopped, sequencerOf } from "./health.js";
import { idsUnavailableMessage } from "./request-ids.js";
import type { MonitorEndpoint } from "./settings.js";

/** The operations' answers (ids, and refusals through {@link refuse}): what GET and HEAD both send. */
const JSON_TYPE = "application/json; charset=utf-8";

/** A HEAD answer's body is dropped; a refusal's Content-Length stays GET's (what Fastify's own HEAD routes do). */
const withoutBody = async (_req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
  if (typeof payload === "string" || Buffer.isBuffer(payload)) void reply.header("content-length", String(Buffer.byteLength(payload)));
  return null;
};

/**
 * Why a generator refuses every id for now, read from its state without generating one (for HEAD): a time-based
 * generator (Snowflake, composite) whose machine-id lease was lost or released, or whose clock stands further behind
 * its last timestamp than it waits out — GET answers 503 then. Passing states that GET waits out (a segment chain's
 * prefetch, a short clock step, a lease being confirmed) are not refusals.
 */
function lastingRefusal(idgen: IdGen, g: IdGenerator): IdGenError | undefined {
  const sequencer = sequencerOf(g);
  if (!sequencer) return undefined;
  const lease = idgen.lease?.state();
  if (leaseStopped(lease)) return new MachineIdLostException(lease!.lastError ?? `the machine id ${lease!.machineId} of namespace ${lease!.namespace} is no longer held`);
  const behind = behindPastThreshold(sequencer);
  if (behind !== undefined) return new ClockTooManyBackwardsException(behind, sequencer.brokenThresholdMs, sequencer.lastTimestamp);
  return undefined;
}

/** Most ids one operation call returns (`?count=`): bounded before any work. */
export const MAX_COUNT = 1000;

export interface EndpointOptions {
  idgen: IdGen;
  exposure: readonly MonitorEndpoint[];
  deleteEnabled: boolean;
  authorize: AuthorizeManagement;
}

type Params = { name?: string };
/** The generator method an operation calls (undefined once it refused the generator: 400); it generates nothing itself. */
type Produce = (g: IdGenerator, name: string, reply: FastifyReply) => (() => string | bigint | number) | undefined;

const refuse = (reply: FastifyReply, status: number, code: string, message: string) => reply.status(status).type(JSON_TYPE).send({ code, message });

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
  /** Checks shared by GET and HEAD, in GET's order; undefined once it has answered (401/403, 400, 404). */
  const admit = async (
    req: FastifyRequest<{ Params: Params; Querystring: { count?: string } }>,
    reply: FastifyReply,
    produce: Produce,
  ) => {
    if (!(await requireAdmin(req, reply, o.authorize))) return undefined;
    const count = parseCount(req.query.count);
    if (typeof count === "string") return void refuse(reply, 400, "invalid_argument", count);
    const name = req.params.name ?? SHARE;
    const generator = registry.find(name);
    if (!generator) return void notFound(reply, name);
    const next = produce(generator, name, reply); // picks the method: nothing is generated until it is called
    return next && { count, generator, next };
  };
  const operation = (path: string, numeric: boolean, produce: Produce) => {
    const handler = async (req: FastifyRequest<{ Params: Params; Querystring: { count?: string } }>, reply: FastifyReply) => {
      const admitted = await admit(req, reply, produce);
      if (!admitted) return reply;
      const { count, generator, next } = admitted;
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
        return reply.type(JSON_TYPE).send(JSON.stringify(req.query.count === undefined ? ids[0] : ids));
      } catch (err) {
        if (!(err instanceof IdGenError)) throw err;
        return refuse(reply, 503, "unavailable", idsUnavailableMessage(err));
      }
    };
    // HEAD must be safe (RFC 9110 §9.3.2). Fastify's automatic HEAD route runs the GET handler and drops the body:
    // every uptime check or load-balancer probe sent with HEAD issued ids (with ?count=, up to 1000 of them, and a
    // segment chain moved on). HEAD runs GET's checks (401/403, 400, 404, and a generator that refuses every id for
    // now: 503) and answers GET's status and content type without generating. Its 200 has no Content-Length: the
    // length is that of ids not generated (a Snowflake id's digits, a count's array), which RFC 9110 lets a HEAD leave
    // out; a refusal's body is known, so it keeps GET's Content-Length.
    const head = async (req: FastifyRequest<{ Params: Params; Querystring: { count?: string } }>, reply: FastifyReply) => {
      const admitted = await admit(req, reply, produce);
      if (!admitted) return reply;
      const refusal = lastingRefusal(o.idgen, admitted.generator);
      if (refusal) return refuse(reply, 503, "unavailable", idsUnavailableMessage(refusal));
      return reply.status(200).type(JSON_TYPE).send();
    };
    for (const url of [`/actuator/${path}`, `/actuator/${path}/:name`]) {
      app.route({ method: "GET", url, exposeHeadRoute: false, handler });
      app.route({ method: "HEAD", url, onSend: withoutBody, handler: head });
    }
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
