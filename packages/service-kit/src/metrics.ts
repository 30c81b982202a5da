import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { collectDefaultMetrics, Registry } from "prom-client";

export interface Metrics {
  /** This process's RPC metrics (`gov_rpc_requests_total`, `gov_rpc_duration_seconds`); add your own here. */
  registry: Registry;
  /** Counts every call and observes its latency, labelled service, method, protocol, code. Put it first (outermost). */
  interceptor: Interceptor;
  /**
   * The same for the calls this process makes to a service in another process (a gateway whose services run
   * elsewhere), labelled protocol `remote`: the latency its callers see, network included. On a client transport.
   */
  remoteInterceptor: Interceptor;
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
    // Gauges named like counters fail `promtool check metrics`; the same counts stay as nodejs_active_handles etc.
    for (const name of ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"]) processRegistry.removeSingleMetric(name);
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

type RpcLabels = { service: string; method: string; protocol: string; code: string };

/**
 * The running totals of one label set (service, method, protocol, code): a call count, a latency sum and per-bucket
 * counts. prom-client's own children validate and hash their label object on every inc/observe (~2 µs per call, a
 * visible share of an in-process config GET); these are found through the method's descriptor and then only add.
 */
class RpcSeries {
  count = 0;
  sum = 0;
  /** Calls per bucket, not cumulative (the exposition adds them up); a call above the last bound is only in count. */
  readonly perBucket = new Float64Array(BUCKETS.length);
  constructor(readonly labels: RpcLabels) {}
  record(seconds: number): void {
    this.count++;
    this.sum += seconds;
    for (let i = 0; i < BUCKETS.length; i++) {
      if (seconds <= BUCKETS[i]) {
        this.perBucket[i]++;
        return;
      }
    }
  }
}

type Value = { labels: Record<string, string | number>; value: number; metricName?: string; sharedLabels?: RpcLabels };

/**
 * A metric prom-client's registry renders and merges like its own (it asks `getForPromString()`, else `get()`, for
 * name, help, type and values), fed from the series above at scrape time.
 */
function exposition(name: string, help: string, type: "counter" | "histogram", values: () => Value[]) {
  const snapshot = (vals: Value[]) => ({ name, help, type, aggregator: "sum" as const, values: vals });
  return {
    name,
    help,
    type,
    aggregator: "sum" as const,
    /** Labels of a series as shared labels: the registry formats each shared-label object once, not per line. */
    getForPromString: async () => snapshot(values()),
    get: async () => snapshot(values().map(({ labels, sharedLabels, ...v }) => ({ ...v, labels: { ...labels, ...sharedLabels } }))),
    reset: () => {},
  };
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  const series: RpcSeries[] = [];
  const byMethod = new WeakMap<DescMethod, Map<string, Map<string, RpcSeries>>>();
  const seriesOf = (method: DescMethod, protocol: string, code: string): RpcSeries => {
    let perMethod = byMethod.get(method);
    if (!perMethod) byMethod.set(method, (perMethod = new Map()));
    let perProtocol = perMethod.get(protocol);
    if (!perProtocol) perMethod.set(protocol, (perProtocol = new Map()));
    let s = perProtocol.get(code);
    if (!s) {
      perProtocol.set(code, (s = new RpcSeries({ service: method.parent.typeName, method: method.name, protocol, code })));
      series.push(s);
    }
    return s;
  };
  const record = (method: DescMethod, protocol: string, code: string, started: number) => {
    seriesOf(method, protocol, code).record((performance.now() - started) / 1000);
  };

  const requests = exposition(
    "gov_rpc_requests_total",
    "RPCs handled, by service, method, protocol and result code (ok or a Connect error code)",
    "counter",
    () => series.map((s) => ({ labels: {}, sharedLabels: s.labels, value: s.count })),
  );
  const duration = exposition(
    "gov_rpc_duration_seconds",
    "RPC latency in seconds, until the response (unary) or the end of the stream (streams)",
    "histogram",
    () =>
      series.flatMap((s) => {
        const lines: Value[] = [];
        let cumulative = 0;
        BUCKETS.forEach((le, i) => {
          cumulative += s.perBucket[i];
          lines.push({ labels: { le }, sharedLabels: s.labels, value: cumulative, metricName: "gov_rpc_duration_seconds_bucket" });
        });
        lines.push({ labels: { le: "+Inf" }, sharedLabels: s.labels, value: s.count, metricName: "gov_rpc_duration_seconds_bucket" });
        lines.push({ labels: {}, sharedLabels: s.labels, value: s.sum, metricName: "gov_rpc_duration_seconds_sum" });
        lines.push({ labels: {}, sharedLabels: s.labels, value: s.count, metricName: "gov_rpc_duration_seconds_count" });
        return lines;
      }),
  );
  registry.registerMetric(requests as unknown as Parameters<Registry["registerMetric"]>[0]);
  registry.registerMetric(duration as unknown as Parameters<Registry["registerMetric"]>[0]);
  const codeOf = (err: unknown) => CODE_NAMES[ConnectError.from(err).code] ?? "unknown";

  async function* observed<T>(stream: AsyncIterable<T>, signal: AbortSignal, done: (code: string) => void): AsyncIterable<T> {
    let code = "canceled"; // unless it ends or fails: the client went away and the server stopped reading
    try {
      yield* stream;
      // A watch ends its stream quietly when the call's signal aborts (the client cancelled, the deadline passed, the
      // server is stopping): that is the call's outcome, not "ok".
      code = signal.aborted ? codeOf(signal.reason) : "ok";
    } catch (err) {
      code = codeOf(err);
      throw err;
    } finally {
      done(code);
    }
  }

  const observing = (protocolFor: (req: { url: string; header: Headers }) => string): Interceptor => (next) => async (req) => {
    const started = performance.now();
    const protocol = protocolFor(req);
    try {
      const res = await next(req);
      if (!res.stream) record(req.method, protocol, "ok", started);
      else return { ...res, message: observed(res.message, req.signal, (code) => record(req.method, protocol, code, started)) };
      return res;
    } catch (err) {
      record(req.method, protocol, codeOf(err), started);
      throw err;
    }
  };

  return {
    registry,
    interceptor: observing(protocolOf),
    remoteInterceptor: observing(() => "remote"),
    async scrape() {
      const [own, proc] = await Promise.all([registry.metrics(), processMetrics().metrics()]);
      return { contentType: registry.contentType, body: `${proc}\n${own}` };
    },
  };
}
