// A bounded loopback load generator for the distributed suite: a fixed rate of mixed REST calls (config reads and
// writes, register / renew / discover, logins, stat reads) spread over the gateways, never more than `concurrency` in
// flight (a call that would exceed it is skipped and counted, so the generator never queues). Every answer is recorded
// with its time window, and every acknowledged write is remembered so that it can be re-read afterwards.

export type ServiceName = "config" | "registry" | "security" | "stats";

export interface LoadOptions {
  gateways: string[];
  /** The Authorization header value (a super user's token: the load is not about RBAC). */
  authorization: string;
  /** The super user's password, for the logins of the mix. */
  password: string;
  /** Namespace of the load's configs and services (with a hash tag). */
  namespace: string;
  ratePerSecond: number;
  concurrency: number;
  durationMs: number;
  /** Configs written round-robin (each write a new content); keep writes per config under the history limit. */
  configIds?: number;
  services?: number;
}

export interface Outcome {
  op: string;
  service: ServiceName;
  gateway: number;
  start: number;
  end: number;
  /** HTTP status; 0 when no answer came (connection failed, timed out). */
  status: number;
  message?: string;
}

export interface LoadResult {
  outcomes: Outcome[];
  /** Calls not sent because `concurrency` were in flight. */
  skipped: number;
  /** Config id → every content a PUT acknowledged (answered `true`). */
  configs: Map<string, string[]>;
  /** Service id → instance ids whose registration was acknowledged. */
  instances: Map<string, Set<string>>;
}

interface Op {
  name: string;
  service: ServiceName;
  weight: number;
  run(gateway: string): Promise<{ status: number; message?: string }>;
}

const REQUEST_TIMEOUT_MS = 15_000;

/** Starts the load; `done` resolves when `durationMs` passed and every call in flight answered. `stop` ends it early. */
export function startLoad(options: LoadOptions): { done: Promise<LoadResult>; stop(): void } {
  const ns = encodeURIComponent(options.namespace);
  const configIds = Array.from({ length: options.configIds ?? 40 }, (_, i) => `cfg-${String(i).padStart(3, "0")}.yaml`);
  const serviceIds = Array.from({ length: options.services ?? 8 }, (_, i) => `svc-${i}`);
  const result: LoadResult = { outcomes: [], skipped: 0, configs: new Map(), instances: new Map() };
  const written: string[] = []; // config ids with an acknowledged write: the ones reads may ask for
  const registered: [string, string][] = []; // [serviceId, instanceId]
  let seq = 0;
  const pick = <T>(list: T[]): T => list[Math.floor(Math.random() * list.length)];
  const headers = { authorization: options.authorization };

  const call = async (url: string, init: RequestInit = {}) => {
    const res = await fetch(url, { ...init, headers: { ...headers, ...(init.headers as Record<string, string>) }, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    const text = await res.text();
    return { status: res.status, text };
  };
  const failure = (r: { status: number; text: string }) => (r.status >= 400 ? { status: r.status, message: r.text.slice(0, 300) } : { status: r.status });

  const ops: Op[] = [
    {
      name: "config.get",
      service: "config",
      weight: 28,
      async run(gw) {
        const id = written.length ? pick(written) : undefined;
        if (!id) return failure(await call(`${gw}/v1/namespaces/${ns}/configs`));
        return failure(await call(`${gw}/v1/namespaces/${ns}/configs/${id}`));
      },
    },
    {
      name: "config.put",
      service: "config",
      weight: 15,
      async run(gw) {
        const n = seq++;
        const id = configIds[n % configIds.length];
        const data = `value: ${n}\nat: ${Date.now()}\n`;
        const r = await call(`${gw}/v1/namespaces/${ns}/configs/${id}`, { method: "PUT", body: data, headers: { "content-type": "text/plain" } });
        if (r.status === 200 && r.text === "true") {
          if (!result.configs.has(id)) written.push(id);
          result.configs.set(id, [...(result.configs.get(id) ?? []), data]);
        }
        return failure(r);
      },
    },
    {
      name: "registry.register",
      service: "registry",
      weight: 10,
      async run(gw) {
        const n = seq++;
        const serviceId = serviceIds[n % serviceIds.length];
        const host = `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
        const body = JSON.stringify({ schema: "http", host, port: 8080, ttl: "3600s", metadata: { seq: String(n) } });
        const r = await call(`${gw}/v1/namespaces/${ns}/services/${serviceId}/instances`, { method: "PUT", body, headers: { "content-type": "application/json" } });
        if (r.status === 200 && r.text === "true") {
          const instanceId = `${serviceId}@http#${host}#8080`;
          if (!result.instances.has(serviceId)) result.instances.set(serviceId, new Set());
          result.instances.get(serviceId)!.add(instanceId);
          registered.push([serviceId, instanceId]);
        }
        return failure(r);
      },
    },
    {
      name: "registry.renew",
      service: "registry",
      weight: 15,
      async run(gw) {
        const target = registered.length ? pick(registered) : undefined;
        if (!target) return failure(await call(`${gw}/v1/namespaces/${ns}/services`));
        const [serviceId, instanceId] = target;
        return failure(await call(`${gw}/v1/namespaces/${ns}/services/${serviceId}/instances/${encodeURIComponent(instanceId)}/renew`, { method: "PUT" }));
      },
    },
    {
      name: "registry.discover",
      service: "registry",
      weight: 20,
      async run(gw) {
        const target = registered.length ? pick(registered) : undefined;
        if (!target) return failure(await call(`${gw}/v1/namespaces/${ns}/services`));
        const [serviceId] = target;
        const consumer = { "x-gov-consumer": pick(serviceIds) };
        const path = Math.random() < 0.5 ? "instances" : "lb";
        return failure(await call(`${gw}/v1/namespaces/${ns}/services/${serviceId}/${path}`, { headers: consumer }));
      },
    },
    {
      name: "security.login",
      service: "security",
      weight: 4,
      async run(gw) {
        const r = await fetch(`${gw}/v1/authenticate/root/login`, { method: "POST", body: JSON.stringify({ password: options.password }), headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
        return failure({ status: r.status, text: await r.text() });
      },
    },
    {
      name: "stats.stat",
      service: "stats",
      weight: 8,
      async run(gw) {
        return failure(await call(`${gw}/v1/namespaces/${ns}/stat`));
      },
    },
  ];
  const totalWeight = ops.reduce((s, o) => s + o.weight, 0);
  const chooseOp = () => {
    let x = Math.random() * totalWeight;
    for (const op of ops) if ((x -= op.weight) < 0) return op;
    return ops[0];
  };

  let inflight = 0;
  let issued = 0;
  let stopped = false;
  const started = Date.now();
  const pending = new Set<Promise<void>>();
  const fire = () => {
    const op = chooseOp();
    const gateway = issued % options.gateways.length;
    issued++;
    inflight++;
    const start = Date.now();
    const p = op
      .run(options.gateways[gateway])
      .catch((err: Error) => ({ status: 0, message: `${err.name}: ${err.message} ${(err.cause as Error | undefined)?.message ?? ""}`.trim() }))
      .then((r) => {
        result.outcomes.push({ op: op.name, service: op.service, gateway, start, end: Date.now(), ...r });
      })
      .finally(() => {
        inflight--;
        pending.delete(p);
      });
    pending.add(p);
  };

  let finish: (r: LoadResult) => void;
  const done = new Promise<LoadResult>((r) => (finish = r));
  const timer = setInterval(() => {
    const elapsed = Date.now() - started;
    if (stopped || elapsed >= options.durationMs) {
      clearInterval(timer);
      void Promise.all(pending).then(() => finish(result));
      return;
    }
    // Open loop: what the rate says is due by now; past the concurrency bound it is skipped, not queued.
    const due = Math.floor((elapsed / 1000) * options.ratePerSecond);
    while (issued + result.skipped < due) {
      if (inflight >= options.concurrency) result.skipped++;
      else fire();
    }
  }, 10);
  return {
    done,
    stop: () => {
      stopped = true;
    },
  };
}
