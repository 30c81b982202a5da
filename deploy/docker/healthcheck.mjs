#!/usr/bin/env node
// The image's HEALTHCHECK: GET /actuator/health/liveness on the management listener of whichever process kind this
// container runs (node images have no curl). The port is MANAGEMENT_SERVER_PORT when set; otherwise the code's
// default for the kind: 8081 for all-in-one and gateway, the service's port + 100 for a service's own process
// (GOV_<NAME>_SERVICE_PORT, default 8091…8095). The kind is the argument of `scripts/start.mjs` in this container.
// A port set only in a gov.yaml file is not seen here: set MANAGEMENT_SERVER_PORT in the environment too.
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** Default HTTP/1.1 port of each service kind's own process (kept equal to the modules' `ports`; a test checks). */
export const SERVICE_PORTS = { config: 8091, registry: 8092, stats: 8093, worker: 8094, security: 8095 };

/** The process kind `node scripts/start.mjs <kind>` runs in this container (PID 1, or any process when run with --init). */
function processKind() {
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    let args;
    try {
      args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    } catch {
      continue; // gone meanwhile
    }
    const at = args.findIndex((a) => a.endsWith("scripts/start.mjs"));
    if (at >= 0) return args[at + 1] || "all-in-one";
  }
  return "all-in-one";
}

export function managementPort(env, kind) {
  if (env.MANAGEMENT_SERVER_PORT) return Number(env.MANAGEMENT_SERVER_PORT);
  if (!(kind in SERVICE_PORTS)) return 8081;
  const own = env[`GOV_${kind.toUpperCase()}_SERVICE_PORT`];
  return (own ? Number(own) : SERVICE_PORTS[kind]) + 100;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const url = `http://127.0.0.1:${managementPort(process.env, processKind())}/actuator/health/liveness`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(4000) });
    if (!res.ok) throw new Error(`${url} answered ${res.status}`);
    process.exit(0);
  } catch (err) {
    console.error(`unhealthy: ${err.message}`);
    process.exit(1);
  }
}
