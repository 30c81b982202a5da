import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { collectDefaultMetrics, Counter, Histogram, Registry, type Counter as CounterT, type Histogram as HistogramT } from "prom-client";

export interface Metrics {
  /** This process's RPC metrics (`gov_rpc_requests_total`, `gov_rpc_duration_seconds`); add your own here. */
  registry: Registry;
  /** Counts every call and observes its latency, labelled service, method, protocol, code. Put it first (outermost). */
  interceptor: Interceptor;
  /** The Prometheus text exposition: process metrics (CPU, memory, event loop, GC) and the registry's. */
  scrape(): Promise<{ contentType: string; body: string }>;
}

// Process metrics describe the Node process, not one runner: collected once per process into their own registry, so
// that several runners in one process (tests) neither register them twice nor start a second event-loop monitor.
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** `Code.NotFound` → `"not_found"`, the names the Connect protocol and our error bodies use. */
const CODE_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(Code)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => [v, k.replace(/[A-Z]/g, (c, i: number) => (i ? "_" : "") + c.toLowerCase())]),
);

/** Latency buckets (seconds): in-process calls take microseconds, Redis round trips milliseconds. */
const BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * The wire protocol of a call, from what the server saw. In-process calls (the all-in-one gateway's REST routes and
 * modules calling each other) have an `in-process:` URL; a network call's content type names its protocol.
 */
function protocolOf(req: { url: string; header: Headers }): string {
  if (req.url.startsWith("in-process:")) return "in-process";
  const type = req.header.get("content-type") ?? "";
  if (type.startsWith("application/grpc-web")) return "grpc-web";
  if (type.startsWith("application/grpc")) return "grpc";
  return "connect";
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  const requests = new Counter({
    name: "gov_rpc_requests_total",
    help: "RPCs handled, by service, method, protocol and result code (ok or a Connect error code)",
    labelNames: ["service", "method", "protocol", "code"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "gov_rpc_duration_seconds",
    help: "RPC latency in seconds, until the response (unary) or the end of the stream (streams)",
    labelNames: ["service", "method", "protocol", "code"] as const,
    buckets: BUCKETS,
    registers: [registry],
  });

  // Label children are created once per label set and found again through the method's descriptor (no string
  // building per call): prom-client's labels() validates and hashes the label object, which the hot path (a config
  // GET) should not pay on every call.
  type Children = { count: CounterT.Internal; time: HistogramT.Internal<string> };
  const byMethod = new WeakMap<DescMethod, Record<string, Record<string, Children>>>();
  const childrenOf = (method: DescMethod, protocol: string, code: string): Children => {
    let perMethod = byMethod.get(method);
    if (!perMethod) byMethod.set(method, (perMethod = {}));
    const perProtocol = (perMethod[protocol] ??= {});
    let c = perProtocol[code];
    if (!c) {
      const labels = { service: method.parent.typeName, method: method.name, protocol, code };
      c = perProtocol[code] = { count: requests.labels(labels), time: duration.labels(labels) };
    }
    return c;
  };
  const record = (method: DescMethod, protocol: string, code: string, started: number) => {
    const c = childrenOf(method, protocol, code);
    c.count.inc();
    c.time.observe((performance.now() - started) / 1000);
  };
  const codeOf = (err: unknown) => CODE_NAMES[ConnectError.from(err).code] ?? "unknown";

  async function* observed<T>(stream: AsyncIterable<T>, done: (code: string) => void): AsyncIterable<T> {
    let code = "canceled"; // unless it ends or fails: the client went away and the server stopped reading
    try {
      yield* stream;
      code = "ok";
    } catch (err) {
      code = codeOf(err);
      throw err;
    } finally {
      done(code);
    }
  }

  const interceptor: Interceptor = (next) => async (req) => {
    const started = performance.now();
    const protocol = protocolOf(req);
    try {
      const res = await next(req);
      if (!res.stream) record(req.method, protocol, "ok", started);
      else return { ...res, message: observed(res.message, (code) => record(req.method, protocol, code, started)) };
      return res;
    } catch (err) {
      record(req.method, protocol, codeOf(err), started);
      throw err;
    }
  };

  return {
    registry,
    interceptor,
    async scrape() {
      const [own, proc] = await Promise.all([registry.metrics(), processMetrics().metrics()]);
      return { contentType: registry.contentType, body: `${proc}\n${own}` };
    },
  };
}
