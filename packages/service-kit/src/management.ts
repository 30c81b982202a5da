import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { ServingState } from "./grpc/health.js";
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
      const components: Record<string, HealthReport> = {};
      const reports = await Promise.all(modules.map(ask));
      modules.forEach((m, i) => (components[m.name] = reports[i]));
      if (shuttingDown) components.shutdown = { status: "DOWN", details: { reason: "the process is shutting down" } };
      const up = Object.values(components).every((c) => c.status === "UP");
      set(up);
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
}

/**
 * The management listener (`management.server.port`), kept apart from the API ports so that probes and scrapes are
 * never behind the API's limits, CORS or auth: Spring-style `/actuator/health` with `liveness` and `readiness`
 * groups (503 when DOWN) and Prometheus `/metrics`. Built, not listening.
 */
export async function buildManagementApp(options: ManagementOptions): Promise<FastifyInstance> {
  const app = fastify({
    loggerInstance: options.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // Probes do not hold connections open; a scrape in progress at exit is not worth waiting for.
    forceCloseConnections: true,
  }) as unknown as FastifyInstance;
  const { readiness, metrics } = options;

  // Liveness: the process answers, so its event loop runs. It stays UP while shutting down (a restart would not help).
  const liveness = { status: "UP" as const };
  app.get("/actuator/health/liveness", async () => liveness);
  app.get("/actuator/health/readiness", async (_req, reply) => {
    const report = await readiness.check();
    return reply.status(report.status === "UP" ? 200 : 503).send(report);
  });
  app.get("/actuator/health", async (_req, reply) => {
    const ready = await readiness.check();
    return reply.status(ready.status === "UP" ? 200 : 503).send({ status: ready.status, components: { liveness, readiness: ready } });
  });
  app.get("/metrics", async (_req, reply) => {
    const { contentType, body } = await metrics.scrape();
    return reply.header("content-type", contentType).send(body);
  });
  app.setNotFoundHandler((req, reply) => {
    void reply.status(404).send({
      code: "not_found",
      message: `no endpoint ${req.method} ${req.url.split("?")[0]} on the management port: use /actuator/health, /actuator/health/liveness, /actuator/health/readiness or /metrics`,
    });
  });
  return app;
}
