import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { wrongMethodRefuser } from "./allowed-methods.js";
import type { ServingState } from "./grpc/health.js";
import { clientErrorHandler, excerpt, frameworkErrorHandler, refusalHandler, refuseUnknownExpectations } from "./http-errors.js";
import { REQUEST_TIMEOUT } from "./request-errors.js";
import type { Logger } from "./logger.js";
import type { Metrics } from "./metrics.js";
import type { HealthReport } from "./service-module.js";

export interface ReadinessReport {
  status: "UP" | "DOWN";
  components: Record<string, HealthReport>;
}

/**
 * The process's readiness: UP while every local module is healthy and the process is not shutting down. It is a
 * ServingState, so grpc.health.v1 on the gRPC listener follows it (Kubernetes gRPC probes, Envoy).
 */
export interface Readiness extends ServingState {
  /** Asks every module now, updates `serving()`, and returns what each said. */
  check(): Promise<ReadinessReport>;
  /** DOWN for good: the process is shutting down. */
  shutDown(): void;
  /** Re-checks every `intervalMs` so that gRPC health watchers hear of an outage without being asked. */
  watch(intervalMs: number): void;
  stop(): void;
}

export function createReadiness(modules: { name: string; health(): HealthReport | Promise<HealthReport> }[]): Readiness {
  const listeners = new Set<() => void>();
  let serving = true;
  let shuttingDown = false;
  let timer: NodeJS.Timeout | undefined;
  const set = (next: boolean) => {
    if (next === serving) return;
    serving = next;
    for (const l of listeners) l();
  };
  let checks = 0;
  const ask = async (m: (typeof modules)[number]): Promise<HealthReport> => {
    try {
      return await m.health();
    } catch (err) {
      return { status: "DOWN", details: { error: (err as Error).message } };
    }
  };
  return {
    serving: () => serving,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async check() {
      // Probes and the watch interval check concurrently: a slow check that began before a change must not
      // overwrite what a later one found, so only the newest check started sets the serving state.
      const mine = ++checks;
      const components: Record<string, HealthReport> = {};
      const reports = await Promise.all(modules.map(ask));
      modules.forEach((m, i) => (components[m.name] = reports[i]));
      if (shuttingDown) components.shutdown = { status: "DOWN", details: { reason: "the process is shutting down" } };
      const up = Object.values(components).every((c) => c.status === "UP");
      if (mine === checks) set(up);
      return { status: up ? "UP" : "DOWN", components };
    },
    shutDown() {
      shuttingDown = true;
      set(false);
    },
    watch(intervalMs) {
      clearInterval(timer);
      timer = setInterval(() => void this.check(), intervalMs);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
    },
  };
}

export interface ManagementOptions {
  logger: Logger;
  readiness: Readiness;
  metrics: Metrics;
  /** gov.limits.request-timeout (default 60 s): a request must have arrived by then. */
  requestTimeoutMs?: number;
  /** More `/actuator/health` components (the ID generator's `machineId`), shown per caller (its Authorization header). */
  healthComponents?: (authorization: string | undefined) => Promise<Record<string, HealthReport>>;
  /**
   * Whether this caller sees components' details (`management.endpoint.health.show-details`): a module's reason for
   * being DOWN holds store addresses and errors. Without it, everyone does.
   */
  showDetails?: (authorization: string | undefined) => Promise<boolean>;
  /** Adds more routes (the `/actuator/idgen*` endpoints). */
  extend?: (app: FastifyInstance) => void;
  /**
   * What only a restart repairs (the ID generator stopped: its machine id is gone, and the process never issues ids
   * again): liveness DOWN, so that an orchestrator restarts the process. Without it liveness is UP while it answers.
   */
  unrecoverable?: () => HealthReport;
}

/** A report with each component's status only. */
function withoutDetails(report: ReadinessReport): ReadinessReport {
  const components: Record<string, HealthReport> = {};
  for (const [name, c] of Object.entries(report.components)) components[name] = { status: c.status };
  return { status: report.status, components };
}

/** Probes and scrapes send no body; one over this is refused (413) before it is read. */
const MANAGEMENT_BODY_LIMIT = 1024;

/**
 * The management listener (`management.server.port`), kept apart from the API ports so that probes and scrapes are
 * never behind the API's limits, CORS or auth: Spring-style `/actuator/health` with `liveness` and `readiness`
 * groups (503 when DOWN) and Prometheus `/metrics`. Built, not listening.
 */
export async function buildManagementApp(options: ManagementOptions): Promise<FastifyInstance> {
  const requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT.ms;
  const app = fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // Probes do not hold connections open; a scrape in progress at exit is not worth waiting for.
    forceCloseConnections: true,
    // The same guards as the API listeners: a port that is reachable is a port that can be abused.
    bodyLimit: MANAGEMENT_BODY_LIMIT,
    requestTimeout: requestTimeoutMs,
    http: { connectionsCheckingInterval: Math.min(1000, requestTimeoutMs), headersTimeout: Math.min(60_000, requestTimeoutMs) },
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler: clientErrorHandler(requestTimeoutMs),
  }) as unknown as FastifyInstance;
  refuseUnknownExpectations(app.server);
  // The endpoints take no body: one of any media type is read up to the limit (413 beyond it) and ignored. Fastify's
  // own parsers know JSON and text only, and answered every other type 415 as if it were no media type at all.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, _body, done) => done(null, undefined));
  const refuseWrongMethod = wrongMethodRefuser(app);
  const { readiness, metrics } = options;

  // Liveness: the process answers, so its event loop runs, and nothing it cannot repair has happened (a stopped ID
  // generator: restarting is the fix, and the probe is what makes an orchestrator do it). UP while shutting down.
  const UP = { status: "UP" as const };
  const liveness = (): HealthReport => {
    const broken = options.unrecoverable?.();
    return broken && broken.status !== "UP" ? { status: "DOWN" } : UP;
  };
  app.get("/actuator/health/liveness", async (_req, reply) => {
    const live = liveness();
    return reply.status(live.status === "UP" ? 200 : 503).send(live);
  });
  const shown = async (report: ReadinessReport, authorization: string | undefined): Promise<ReadinessReport> =>
    !options.showDetails || (await options.showDetails(authorization)) ? report : withoutDetails(report);
  app.get("/actuator/health/readiness", async (req, reply) => {
    const report = await shown(await readiness.check(), req.headers.authorization);
    return reply.status(report.status === "UP" ? 200 : 503).send(report);
  });
  app.get("/actuator/health", async (req, reply) => {
    const [checked, more] = await Promise.all([readiness.check(), options.healthComponents?.(req.headers.authorization) ?? ({} as Record<string, HealthReport>)]);
    const ready = await shown(checked, req.headers.authorization);
    const live = liveness();
    const status = live.status === "UP" && ready.status === "UP" && Object.values(more).every((c) => c.status === "UP") ? "UP" : "DOWN";
    return reply.status(status === "UP" ? 200 : 503).send({ status, components: { liveness: live, readiness: ready, ...more } });
  });
  options.extend?.(app);
  app.get("/metrics", async (_req, reply) => {
    const { contentType, body } = await metrics.scrape();
    return reply.header("content-type", contentType).send(body);
  });
  // the endpoints this listener has (its exposure settings may leave /actuator/idgen out: it is then not offered)
  const offered = () => ["/actuator/health", "/actuator/health/liveness", "/actuator/health/readiness", "/actuator/idgen", "/metrics"].filter((url) => app.hasRoute({ method: "GET", url }));
  const notFound = (req: FastifyRequest, reply: FastifyReply): void => {
    if (refuseWrongMethod(req, reply)) return;
    const paths = offered();
    void reply.status(404).send({
      code: "not_found",
      message: `no endpoint ${req.method} ${excerpt(req.url.split("?")[0])} on the management port: use ${paths.length > 1 ? `${paths.slice(0, -1).join(", ")} or ${paths.at(-1)}` : (paths[0] ?? "/actuator/health")}`,
    });
  };
  app.setErrorHandler(refusalHandler(`the request body is over the limit of ${MANAGEMENT_BODY_LIMIT} bytes: the management endpoints take no body`, "management request failed", notFound));
  app.setNotFoundHandler(notFound);
  return app;
}

