import type { AddressInfo } from "node:net";
import { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from "fastify";
import type { Logger } from "./logger.js";

/** What a log line shows of a request or a reply passed as `req` / `res` (the same fields Fastify's logger showed). */
const SERIALIZERS = {
  req: (req: FastifyRequest) => ({ method: req.method, url: req.url, remoteAddress: req.ip }),
  res: (reply: { statusCode: number }) => ({ statusCode: reply.statusCode }),
};

/**
 * Fastify options that send its logs to `logger` without giving Fastify a logger of its own (no `loggerInstance`). With
 * one, Fastify adds a response-listener pair and a closure to every request, bookkeeping for its request-completed line
 * (off here anyway): ~1.7 % of a config GET's CPU, ~2 µs, under `node --cpu-prof`. Request-scoped logs (`req.log`,
 * `reply.log`: failed answers, Fastify's warnings about a request) still reach `logger`, either the same logger for every
 * request (`"shared"`: the REST gateway's error lines carry req.id themselves, and a pino child costs ~1 µs a request)
 * or a child bound to the request id (`"child"`, what Fastify made). Without a logger Fastify writes no "Server listening
 * at …" lines: {@link logListening} does.
 */
export function quietFastifyLogging(logger: Logger, perRequest: "shared" | "child"): Pick<FastifyServerOptions, "logController" | "childLoggerFactory"> {
  const base = logger.child({}, { serializers: SERIALIZERS }) as FastifyBaseLogger;
  return {
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: perRequest === "shared" ? () => base : (_fastifysOwn, bindings) => base.child(bindings),
  };
}

/** Logs "Server listening at <url>" for each address `app` listens on, as Fastify does when it has a logger. */
export function logListening(app: FastifyInstance, logger: Logger): void {
  app.addHook("onListen", (done) => {
    for (const a of app.addresses() as (AddressInfo | string)[]) {
      logger.info(`Server listening at ${typeof a === "string" ? a : `http://${a.family === "IPv6" ? `[${a.address}]` : a.address}:${a.port}`}`);
    }
    done();
  });
}
