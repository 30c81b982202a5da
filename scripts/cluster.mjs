#!/usr/bin/env node
// `npm run start:cluster` / `npm run stop:cluster`: the distributed topology on this machine, without Docker — a Redis
// Cluster of 3 masters and 3 replicas, the config, registry, stats and security services, two stats workers and two
// gateways, each its own process with its own ports and log file (`.cluster/logs/<name>.log`). PIDs go to
// `.cluster/pids.json`, so stop:cluster stops exactly those processes (SIGTERM, SIGKILL after a grace).
// Importable too (`startCluster`, `stopCluster`): the distributed test suite and the cluster benchmark drive this file,
// so what they prove is what users run.
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Redis node i listens on base + i (its cluster bus on base + i + 10000). Each process gets a block of 10 ports. */
const REDIS_NODES = 6;
/** Processes in start order: the security service first (it creates the super user and the JWT key the others read). */
const PROCESSES = [
  { name: "security", kind: "security", block: 1, service: "security" },
  { name: "config", kind: "config", block: 2, service: "config" },
  { name: "registry", kind: "registry", block: 3, service: "registry" },
  // The workers before the stats service (which runs the job too): one of them takes the `stat` mutex first.
  { name: "worker-1", kind: "worker", block: 4, service: "worker" },
  { name: "worker-2", kind: "worker", block: 5, service: "worker" },
  { name: "stats", kind: "stats", block: 6, service: "stats" },
  { name: "gateway-1", kind: "gateway", block: 7 },
  { name: "gateway-2", kind: "gateway", block: 8 },
];
/** Services the gateways reach by URL (`gov.<name>-service.url`). */
const REMOTE_SERVICES = ["config", "registry", "stats", "security"];

/** Where every piece listens for a base port: `{ redis: number[], processes: {name: {port, grpcPort, managementPort}} }`. */
export function clusterPorts(basePort) {
  const redis = Array.from({ length: REDIS_NODES }, (_, i) => basePort + i);
  const processes = Object.fromEntries(
    PROCESSES.map((p) => {
      const first = basePort + p.block * 10;
      return [p.name, { port: first, grpcPort: first + 1, managementPort: first + 2 }];
    }),
  );
  return { redis, processes };
}

/** Every port the topology binds for `basePort` (Redis cluster bus ports included). */
export function allPorts(basePort) {
  const { redis, processes } = clusterPorts(basePort);
  return [...redis, ...redis.map((p) => p + 10_000), ...Object.values(processes).flatMap((p) => [p.port, p.grpcPort, p.managementPort])];
}

const portFree = (port) =>
  new Promise((done) => {
    const srv = createServer();
    srv.once("error", () => done(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => done(true)));
  });

/**
 * A base port whose whole block is free now: for tests and benchmarks beside other work. Below the kernel's ephemeral
 * range (32768 and up on Linux), Redis cluster bus ports included, so that no outgoing connection can take one of
 * them between this check and the listen.
 */
export async function findFreeBasePort() {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 10_000 + 100 * Math.floor(Math.random() * 127); // 10000 … 22600; bus ports up to 32605
    const free = await Promise.all(allPorts(base).map(portFree));
    if (free.every(Boolean)) return base;
  }
  throw new Error("no free block of ports found between 10000 and 22700");
}

/** One inline Redis command, first reply (enough for PING, CLUSTER INFO, INFO replication). */
export function redisCommand(port, command, timeoutMs = 1000) {
  return new Promise((resolvePromise, reject) => {
    const sock = connect({ host: "127.0.0.1", port });
    let data = "";
    const done = (err) => {
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolvePromise(data);
    };
    const timer = setTimeout(() => done(new Error(`redis :${port} did not answer ${command}`)), timeoutMs);
    sock.on("error", done);
    sock.on("connect", () => sock.write(`${command}\r\n`));
    sock.on("data", (chunk) => {
      data += chunk.toString("utf8");
      const bulk = /^\$(\d+)\r\n/.exec(data);
      if (!bulk || Buffer.byteLength(data) >= bulk[0].length + Number(bulk[1]) + 2) done();
    });
  });
}

/** Polls `check` every 100 ms until it returns true, or throws naming `what` after `timeoutMs`. */
export async function waitFor(what, check, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await Promise.resolve().then(check).catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Alive and still the process we started (a PID can be reused): its command line must contain `marker`. */
export function isOurs(pid, marker) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker);
  } catch {
    return false; // gone (or not Linux: then stop relies on the signal alone)
  }
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    // a zombie (killed, not yet reaped by its parent) counts as gone
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
};

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. Only for a PID we started (`marker`). */
/** Stops one process of ours; true when it was running (and is stopped now), false when it was gone already. */
export async function stopPid(pid, marker, graceMs = 15_000) {
  if (!pid || !isOurs(pid, marker)) return false;
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return false;
  }
  const deadline = Date.now() + graceMs;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (alive(pid)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
    while (alive(pid)) await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

/** `redis-server` of node `i`: cluster mode, no persistence of data (only its nodes.conf), fast failover. */
function redisSpec(dir, port, nodeTimeoutMs) {
  const nodeDir = join(dir, "redis", String(port));
  mkdirSync(nodeDir, { recursive: true });
  return {
    name: `redis-${port}`,
    marker: "redis-server",
    command: "redis-server",
    args: [
      "--port", String(port), "--bind", "127.0.0.1", "--dir", nodeDir, "--save", "", "--appendonly", "no",
      "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", String(nodeTimeoutMs),
      // a replica whose master died may take over however long it was cut off: the test kills masters on purpose
      "--cluster-replica-validity-factor", "0",
    ],
    env: {},
    log: join(dir, "logs", `redis-${port}.log`),
  };
}

/** Spawns detached (it outlives `npm run start:cluster`), output to its log file (appended to on a restart). */
function spawnLogged(spec, restart) {
  const fd = openSync(spec.log, restart ? "a" : "w");
  try {
    const child = spawn(spec.command, spec.args, { cwd: root, env: { ...process.env, ...spec.env }, detached: true, stdio: ["ignore", fd, fd] });
    child.unref();
    return child.pid;
  } finally {
    closeSync(fd);
  }
}

const readyAt = async (managementPort) => (await fetch(`http://127.0.0.1:${managementPort}/actuator/health/readiness`)).ok;

/** The last JSON log line of a process's log whose `msg` matches, or undefined. */
export function lastLogLine(logFile, msg) {
  if (!existsSync(logFile)) return undefined;
  const lines = readFileSync(logFile, "utf8").split("\n");
  for (let i = lines.length - 1; i >= 0; i--) {
    if (!lines[i].includes(msg)) continue;
    try {
      const entry = JSON.parse(lines[i]);
      if (typeof entry.msg === "string" && entry.msg.includes(msg)) return entry;
    } catch {}
  }
  return undefined;
}

/**
 * Starts the topology and resolves once every process is ready. Options: `dir` (default `.cluster/`), `basePort`
 * (default GOV_CLUSTER_BASE_PORT or 7000), `superPassword` (default GOV_SUPER_PASSWORD or a generated one), `build`
 * (default true: `npm run build` once first), `env` (extra environment for every product process), `nodeTimeoutMs`
 * (Redis cluster-node-timeout, default 2000), `log` (progress lines; default stderr).
 */
export async function startCluster(options = {}) {
  const dir = resolve(options.dir ?? join(root, ".cluster"));
  const basePort = options.basePort ?? Number(process.env.GOV_CLUSTER_BASE_PORT ?? 7000);
  const say = options.log ?? ((line) => process.stderr.write(`${line}\n`));
  const superPassword = options.superPassword ?? process.env.GOV_SUPER_PASSWORD ?? randomBytes(12).toString("base64url");
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 2000;
  const pidsFile = join(dir, "pids.json");
  if (existsSync(pidsFile) && readPids(pidsFile).some((p) => isOurs(p.pid, p.marker))) {
    throw new Error(`a cluster is already running from ${dir}: npm run stop:cluster first`);
  }
  rmSync(join(dir, "redis"), { recursive: true, force: true });
  mkdirSync(join(dir, "logs"), { recursive: true });
  const busy = (await Promise.all(allPorts(basePort).map(async (p) => ((await portFree(p)) ? undefined : p)))).filter(Boolean);
  if (busy.length) throw new Error(`ports ${busy.join(", ")} are in use: set GOV_CLUSTER_BASE_PORT to another base (it uses ports in base … base+82 and base+10000 … base+10005)`);

  if (options.build !== false) {
    say("building (npm run build) …");
    execFileSync(process.execPath, [join(root, "scripts", "build.mjs")], { stdio: ["ignore", "ignore", "inherit"] });
  }

  const ports = clusterPorts(basePort);
  const running = []; // {name, pid, marker, ...}: what pids.json records
  const save = () => writeFileSync(pidsFile, `${JSON.stringify(running, null, 2)}\n`);
  const launch = (spec, extra = {}) => {
    const pid = spawnLogged(spec, false);
    const entry = { name: spec.name, pid, marker: spec.marker, log: spec.log, command: spec.command, args: spec.args, env: spec.env, ...extra };
    running.push(entry);
    save();
    return entry;
  };
  const stopAll = () => stopCluster({ dir, log: () => {} });

  try {
    // The Redis Cluster: 6 nodes, then `redis-cli --cluster create` makes 3 masters with one replica each.
    for (const port of ports.redis) launch(redisSpec(dir, port, nodeTimeoutMs), { port });
    for (const port of ports.redis) await waitFor(`redis-server on :${port}`, async () => (await redisCommand(port, "PING")).startsWith("+PONG"), 10_000);
    execFileSync("redis-cli", ["--cluster", "create", ...ports.redis.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "1", "--cluster-yes"], { stdio: "ignore" });
    await waitFor("the Redis Cluster (3 masters, 3 replicas in sync)", async () => {
      for (const port of ports.redis) {
        if (!(await redisCommand(port, "CLUSTER INFO")).includes("cluster_state:ok")) return false;
      }
      const roles = await Promise.all(ports.redis.map((port) => redisCommand(port, "INFO replication")));
      return roles.filter((r) => r.includes("role:slave") && r.includes("master_link_status:up")).length === 3;
    }, 60_000);
    const redisUrl = `redis-cluster://${ports.redis.map((p) => `127.0.0.1:${p}`).join(",")}`;

    const serviceUrls = Object.fromEntries(REMOTE_SERVICES.map((s) => [`GOV_${s.toUpperCase()}_SERVICE_URL`, `http://127.0.0.1:${ports.processes[s].port}`]));
    const specOf = (p) => {
      const own = ports.processes[p.name];
      // what this process gets on top of the environment it is started from (recorded, for a restart by the CLI)
      const env = {
        // built JS, as users run it: not the TypeScript sources a test runner's `--conditions=@gov/source` would pick
        NODE_OPTIONS: (process.env.NODE_OPTIONS ?? "").replace(/--conditions[= ]@gov\/source/g, "").trim(),
        NODE_ENV: process.env.NODE_ENV ?? "production",
        REDIS_URL: redisUrl,
        GOV_SUPER_PASSWORD: superPassword,
        // An acknowledged write waits for one replica (survives a master's loss); the Redis stores read it.
        GOV_REDIS_MIN_REPLICAS: "1",
        MANAGEMENT_SERVER_PORT: String(own.managementPort),
        ...(p.service
          ? { [`GOV_${p.service.toUpperCase()}_SERVICE_PORT`]: String(own.port), [`GOV_${p.service.toUpperCase()}_SERVICE_GRPC_PORT`]: String(own.grpcPort) }
          : { PORT: String(own.port), GOV_GRPC_PORT: String(own.grpcPort), ...serviceUrls }),
        ...options.env,
      };
      return { name: p.name, marker: "scripts/start.mjs", command: process.execPath, args: [join(root, "scripts", "start.mjs"), p.kind], env, log: join(dir, "logs", `${p.name}.log`) };
    };
    const startProcess = async (p) => {
      const own = ports.processes[p.name];
      const entry = launch(specOf(p), { kind: p.kind, ...own });
      await waitFor(`${p.name} to be ready (see ${entry.log})`, async () => {
        if (!alive(entry.pid)) throw new Error(`${p.name} exited: see ${entry.log}`);
        return readyAt(own.managementPort);
      }, 60_000).catch((err) => {
        const tail = existsSync(entry.log) ? readFileSync(entry.log, "utf8").trim().split("\n").slice(-3).join("\n") : "";
        throw new Error(`${alive(entry.pid) ? err.message : `${p.name} exited during startup`}; the end of ${entry.log}:\n${tail}`);
      });
    };
    const byName = (name) => PROCESSES.find((p) => p.name === name);
    await startProcess(byName("security"));
    await Promise.all(["config", "registry", "worker-1", "worker-2"].map((n) => startProcess(byName(n))));
    // the `stat` mutex is a redlock key in the system namespace's slot: one node answers :1 once a worker holds it
    const system = options.env?.GOV_NAMESPACE_SYSTEM ?? process.env.GOV_NAMESPACE_SYSTEM ?? "gov-{system}";
    await waitFor("a worker to take the stat mutex", async () => {
      const answers = await Promise.all(ports.redis.map((port) => redisCommand(port, `EXISTS ${system}:mutex:stat`).catch(() => "")));
      return answers.some((a) => a.startsWith(":1"));
    }, 20_000);
    await startProcess(byName("stats"));
    await Promise.all(["gateway-1", "gateway-2"].map((n) => startProcess(byName(n))));

    const cluster = {
      dir,
      basePort,
      superPassword,
      redisUrl,
      ports,
      gateways: ["gateway-1", "gateway-2"].map((n) => `http://127.0.0.1:${ports.processes[n].port}`),
      /** The record of a process or Redis node by name (`config`, `worker-1`, `redis-7000`): pid, ports, log. */
      get: (name) => running.find((r) => r.name === name),
      processes: () => running.slice(),
      /** Sends `signal` (default SIGKILL) to one of ours: the fault injection of the tests. */
      kill(name, signal = "SIGKILL") {
        const r = running.find((x) => x.name === name);
        if (r && isOurs(r.pid, r.marker)) process.kill(r.pid, signal);
      },
      /** Starts a stopped process or Redis node again with its first settings; resolves when it is ready. */
      restart: (name) => restartRecorded(name, { dir }).then((entry) => {
        running[running.findIndex((r) => r.name === name)] = entry;
      }),
      stop: stopAll,
    };
    return cluster;
  } catch (err) {
    await stopAll();
    throw err;
  }
}

function readPids(pidsFile) {
  try {
    return JSON.parse(readFileSync(pidsFile, "utf8"));
  } catch {
    return [];
  }
}

/**
 * Starts a stopped process or Redis node of the cluster in `dir` again, with the command and settings it was first
 * started with (pids.json records them), records its new PID (so that stop:cluster stops it too) and resolves with its
 * record once it is ready. A Redis node comes back only once a replica has taken over its slots: without persistence
 * it returns empty, and a master returning before that would have its replica copy the emptiness.
 */
export async function restartRecorded(name, options = {}) {
  const dir = resolve(options.dir ?? join(root, ".cluster"));
  const pidsFile = join(dir, "pids.json");
  const recorded = readPids(pidsFile);
  const r = recorded.find((x) => x.name === name);
  if (!r) throw new Error(`no process named ${name} in ${pidsFile}: one of ${recorded.map((x) => x.name).join(", ") || "(none: is the cluster started?)"}`);
  if (alive(r.pid) && isOurs(r.pid, r.marker)) throw new Error(`${name} still runs (pid ${r.pid}): stop it first`);
  if (name.startsWith("redis-")) {
    const other = recorded.find((x) => x.name.startsWith("redis-") && x.name !== name && alive(x.pid));
    if (!other) throw new Error(`no other Redis node of the cluster runs: start the cluster again (npm run stop:cluster, then start:cluster)`);
    await waitFor(`a replica to take over the slots of ${name}`, async () => {
      const line = (await redisCommand(other.port, "CLUSTER NODES")).split("\n").find((l) => l.includes(`127.0.0.1:${r.port}@`));
      return !!line && !(line.includes("master") && /\d+-\d+|\s\d+$/.test(line.split(" ").slice(8).join(" ")));
    }, 60_000);
  }
  const entry = { ...r, pid: spawnLogged(r, true) };
  // the latest pids.json (another restart may have written it meanwhile), with this one's new PID
  writeFileSync(pidsFile, `${JSON.stringify(readPids(pidsFile).map((x) => (x.name === name ? entry : x)), null, 2)}\n`);
  if (name.startsWith("redis-")) await waitFor(`${name} to answer`, async () => (await redisCommand(r.port, "PING")).startsWith("+PONG"), 10_000);
  else {
    await waitFor(`${name} to be ready (see ${r.log})`, async () => {
      if (!alive(entry.pid)) throw new Error(`${name} exited: see ${r.log}`);
      return readyAt(r.managementPort);
    }, 60_000);
  }
  return entry;
}

/**
 * Stops what `startCluster` started from `dir` by PID: the gateways first, then workers and services, Redis last
 * (each SIGTERM: graceful; SIGKILL after `graceMs`), then removes the Redis data and pids.json. Logs stay.
 */
export async function stopCluster(options = {}) {
  const dir = resolve(options.dir ?? join(root, ".cluster"));
  const say = options.log ?? ((line) => process.stderr.write(`${line}\n`));
  const pidsFile = join(dir, "pids.json");
  const recorded = readPids(pidsFile);
  const graceMs = options.graceMs ?? 15_000;
  let stopped = 0;
  const stage = async (names) => {
    const results = await Promise.all(recorded.filter((r) => names(r.name)).map((r) => stopPid(r.pid, r.marker, graceMs)));
    stopped += results.filter(Boolean).length;
  };
  await stage((n) => n.startsWith("gateway-"));
  await stage((n) => !n.startsWith("gateway-") && !n.startsWith("redis-"));
  await stage((n) => n.startsWith("redis-"));
  // A process started by hand in place of one of ours (not through `restart`) has a PID nobody recorded: its ports are
  // still taken. It is named, not hunted down, and the data of Redis nodes that still run is left where they use it.
  const taken = [];
  for (const r of recorded) {
    const ports = [r.port, r.grpcPort, r.managementPort].filter((p) => typeof p === "number");
    const busy = (await Promise.all(ports.map(async (p) => ((await portFree(p)) ? undefined : p)))).filter(Boolean);
    if (busy.length) taken.push(`${r.name} (port ${busy.join(", ")})`);
  }
  if (!taken.some((t) => t.startsWith("redis-"))) rmSync(join(dir, "redis"), { recursive: true, force: true });
  rmSync(pidsFile, { force: true });
  // what was running, not what was recorded: a process that had died (killed by hand, crashed) is said to be gone
  const gone = recorded.length - stopped;
  say(recorded.length ? `stopped ${stopped} processes${gone ? ` (${gone} of the ${recorded.length} recorded had stopped already)` : ""}; logs are in ${join(dir, "logs")}` : `nothing recorded in ${pidsFile}: nothing to stop`);
  if (taken.length) {
    say(`still running, started by hand (not by start:cluster or \`node scripts/cluster.mjs restart\`, so not recorded): ${taken.join(", ")} — stop them yourself (\`ss -ltnp\` names the process on each port)`);
  }
}

function describe(cluster) {
  const rows = [`Redis Cluster: ${cluster.redisUrl} (3 masters + 3 replicas; logs ${join(cluster.dir, "logs", "redis-<port>.log")})`];
  for (const r of cluster.processes()) {
    if (r.name.startsWith("redis-")) continue;
    const grpc = r.kind === "gateway" || r.kind === "worker" ? "" : `, gRPC :${r.grpcPort}`;
    rows.push(`${r.name.padEnd(10)} pid ${String(r.pid).padEnd(8)} http://127.0.0.1:${r.port}${grpc}, management :${r.managementPort}   log ${r.log}`);
  }
  rows.push("", `Gateways: ${cluster.gateways.join(" and ")} (REST /v1, docs at /docs)`);
  rows.push(`Log in as root with password ${cluster.superPassword}:`);
  rows.push(`  curl -s -X POST -d '{"password":"${cluster.superPassword}"}' ${cluster.gateways[0]}/v1/authenticate/root/login`);
  rows.push("Stop everything: npm run stop:cluster");
  return rows.join("\n");
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const command = process.argv[2];
  try {
    if (command === "start") {
      const cluster = await startCluster();
      process.stdout.write(`\n${describe(cluster)}\n`);
    } else if (command === "stop") {
      await stopCluster();
    } else if (command === "restart" && process.argv[3]) {
      const entry = await restartRecorded(process.argv[3]);
      process.stdout.write(`${entry.name} runs again: pid ${entry.pid}, log ${entry.log}\n`);
    } else {
      process.stderr.write("usage: node scripts/cluster.mjs start|stop|restart <name> (a name of .cluster/pids.json: config, worker-1, redis-7001 …)\n");
      process.exit(2);
    }
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
}
