import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Path of `redis-server`, or undefined when it is not installed. */
export function redisServerPath(): string | undefined {
  try {
    return execFileSync("sh", ["-c", "command -v redis-server"], { encoding: "utf8" }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** A free loopback TCP port (asks the OS for one). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

/** Whether a loopback listener could bind `port` now. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/** Sends one inline command and returns the first reply line (enough for PING / CLUSTER INFO checks). */
function rawCommand(port: number, command: string, timeoutMs = 500): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect({ host: "127.0.0.1", port });
    let data = "";
    const done = (err?: Error) => {
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(data);
    };
    const timer = setTimeout(() => done(new Error("timeout")), timeoutMs);
    sock.on("error", done);
    sock.on("connect", () => sock.write(`${command}\r\n`));
    sock.on("data", (chunk) => {
      data += chunk.toString("utf8");
      // bulk replies ($len\r\n...) may arrive in pieces; wait for the whole body
      const m = /^\$(\d+)\r\n/.exec(data);
      if (!m || data.length >= m[0].length + Number(m[1]) + 2) done();
    });
  });
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 15_000, gone?: () => Error | undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    const err = gone?.();
    if (err) throw err;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** PID of the running server, or undefined while it is stopped. */
  readonly pid: number | undefined;
  /** Stops the server (SIGTERM by PID, then SIGKILL) and waits until the port is closed. */
  stop(): Promise<void>;
  /** Starts it again on the same port (an empty data set: persistence is off). */
  start(): Promise<void>;
}

function spawnRedis(port: number, extra: string[], dir: string): ChildProcess {
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, ...extra],
    { stdio: "ignore" },
  );
  child.unref();
  return child;
}

/**
 * A server that exited before it answered: mostly its port (or a Cluster node's bus port, port + 10000) was taken
 * between `freePort` and its bind — the OS hands the same ephemeral ports to the outgoing connections of every test
 * running beside. Retried on fresh ports; waiting out the whole startup timeout for a dead process told nothing.
 */
class ExitedAtStart extends Error {}

const exitedAtStart = (child: ChildProcess, port: number) => () =>
  running(child) ? undefined : new ExitedAtStart(`redis-server on port ${port} exited at start (${child.exitCode ?? child.signalCode}): its port or bus port taken?`);

/** How many times a server or Cluster whose node exited at start is started again on fresh ports. */
const START_ATTEMPTS = 3;

/** Not exited yet: a server that exited on its own has an exit code, one killed by a signal (a test's SIGKILL) a signal code. */
const running = (child: ChildProcess | undefined): child is ChildProcess & { pid: number } => !!child?.pid && child.exitCode === null && child.signalCode === null;

/** Sends `signal` unless the process is gone already (it may die between the check and the kill). */
function signal(child: ChildProcess & { pid: number }, name: NodeJS.Signals): void {
  try {
    process.kill(child.pid, name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
  }
}

async function killByPid(child: ChildProcess | undefined, port: number): Promise<void> {
  if (running(child)) {
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    signal(child, "SIGTERM");
    const timer = setTimeout(() => running(child) && signal(child, "SIGKILL"), 3000);
    await exited;
    clearTimeout(timer);
  }
  await waitFor(`port ${port} to close`, async () => {
    try {
      await rawCommand(port, "PING", 200);
      return false;
    } catch {
      return true;
    }
  });
}

/** Starts a standalone `redis-server` on a free loopback port. */
export async function startRedis(opts: { port?: number; args?: string[] } = {}): Promise<RedisServer> {
  let port = opts.port ?? (await freePort());
  // Persistence is off, so the server writes nothing: the shared temp folder is a safe working directory.
  const dir = tmpdir();
  let child: ChildProcess | undefined;
  const start = async () => {
    const started = spawnRedis(port, opts.args ?? [], dir);
    child = started;
    try {
      await waitFor(`redis-server on port ${port}`, async () => (await rawCommand(port, "PING")).startsWith("+PONG"), undefined, exitedAtStart(started, port));
    } catch (err) {
      started.kill("SIGKILL"); // never leave a half-started server behind
      throw err;
    }
  };
  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      break;
    } catch (err) {
      // A port the caller chose is theirs to free; one picked here is picked again.
      if (!(err instanceof ExitedAtStart) || opts.port !== undefined || attempt === START_ATTEMPTS) throw err;
      port = await freePort();
    }
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return running(child) ? child.pid : undefined;
    },
    stop: () => killByPid(child, port),
    start,
  };
}

export interface RedisClusterNode {
  readonly port: number;
  /** PID of the server (a test may SIGKILL it to fail the node over); the new one after `restart`. */
  readonly pid: number;
  /** The cluster's node id (`CLUSTER MYID`). */
  readonly id: string;
}

export interface RedisClusterServers {
  /** Every node's port, masters first. */
  readonly ports: number[];
  /** `redis-cluster://127.0.0.1:a,127.0.0.1:b,…`: every node (seeds only: the client finds the roles itself). */
  readonly url: string;
  /** Every node's PID, in the order of `ports`. */
  readonly pids: number[];
  /** The nodes started as masters, each with a share of the slots. */
  readonly masters: RedisClusterNode[];
  /** The nodes started as replicas: `replicas[i * r + j]` replicates `masters[i]` (r replicas per master). */
  readonly replicas: RedisClusterNode[];
  /**
   * Starts the node on `port` again (stopping it first if it runs) with its cluster config: a master that was failed
   * over comes back as a replica of the node that took its slots.
   */
  restart(port: number): Promise<void>;
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /** Replicas per master (default 0). The cluster is ready once every replica's link to its master is up. */
  replicas?: number;
  /**
   * `cluster-node-timeout` in ms: how long a silent node takes to be declared failed (and, with replicas, failed over).
   * Default 5000 without replicas, 2000 with (a failover then takes ~3-5 s; shorter risks spurious failovers on a
   * busy machine).
   */
  nodeTimeoutMs?: number;
}

/**
 * How long a lookup of the cluster's state (which node serves a key, which holds a subscriber) waits for its answer.
 * Not rawCommand's 500 ms, which tells a server that is down or frozen from one that is up: the nodes asked here answer
 * in a millisecond, and a test process stalled past 500 ms on CI's two loaded cores (its timer then fires before it
 * reads the answer already there) failed its setup with "timeout" — 1–2 of 5 lookups with a 600 ms stall.
 */
const LOOKUP_TIMEOUT_MS = 5000;

/** A bulk reply's body (`$len\r\nbody\r\n` → body). */
const bulkBody = (reply: string) => reply.replace(/^\$\d+\r\n/, "").replace(/\r\n$/, "");

/**
 * Starts a Redis Cluster of `size` masters on free loopback ports, with `options.replicas` replicas per master, and
 * waits for `cluster_state:ok` on every node (and, with replicas, `master_link_status:up` on each replica).
 */
export async function startRedisCluster(size = 3, options: RedisClusterOptions = {}): Promise<RedisClusterServers> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startClusterOnce(size, options);
    } catch (err) {
      if (!(err instanceof ExitedAtStart) || attempt === START_ATTEMPTS) throw err;
    }
  }
}

async function startClusterOnce(size: number, options: RedisClusterOptions): Promise<RedisClusterServers> {
  const perMaster = options.replicas ?? 0;
  const total = size * (1 + perMaster);
  const nodeTimeout = options.nodeTimeoutMs ?? (perMaster > 0 ? 2000 : 5000);
  const ports: number[] = [];
  while (ports.length < total) {
    const p = await freePort();
    // The cluster bus listens on port + 10000: it must be free too.
    if (!ports.includes(p) && !ports.includes(p + 10000) && p < 55535 && (await portIsFree(p + 10000))) ports.push(p);
  }
  const dir = mkdtempSync(join(tmpdir(), "gov-cluster-"));
  const spawnNode = (port: number) =>
    spawnRedis(
      port,
      [
        "--cluster-enabled", "yes",
        "--cluster-config-file", join(dir, `nodes-${port}.conf`),
        "--cluster-node-timeout", String(nodeTimeout),
        // A replica may always take over, however long its master was silent before it died.
        "--cluster-replica-validity-factor", "0",
      ],
      dir,
    );
  const children = ports.map(spawnNode);
  const stop = async () => {
    await Promise.all(children.map((c, i) => killByPid(c, ports[i])));
    rmSync(dir, { recursive: true, force: true });
  };
  const ids: string[] = [];
  try {
    for (const port of ports) {
      const child = children[ports.indexOf(port)];
      await waitFor(`cluster node on port ${port}`, async () => (await rawCommand(port, "PING")).startsWith("+PONG"), undefined, exitedAtStart(child, port));
      ids.push(bulkBody(await rawCommand(port, "CLUSTER MYID")));
    }
    // Assign slot ranges and introduce the nodes ourselves: quicker than `redis-cli --cluster create`.
    const per = Math.floor(16384 / size);
    for (let i = 0; i < size; i++) {
      const from = i * per;
      const to = i === size - 1 ? 16383 : from + per - 1;
      await rawCommand(ports[i], `CLUSTER ADDSLOTSRANGE ${from} ${to}`);
    }
    for (const port of ports.slice(1)) await rawCommand(ports[0], `CLUSTER MEET 127.0.0.1 ${port}`);
    // A replica can only follow a master it knows: wait until each node knows them all, then attach the replicas.
    for (const port of ports) {
      await waitFor(`node ${port} to know the cluster`, async () => (await rawCommand(port, "CLUSTER INFO")).includes(`cluster_known_nodes:${total}`), 30_000);
    }
    for (let r = 0; r < size * perMaster; r++) {
      const port = ports[size + r];
      const masterId = ids[Math.floor(r / perMaster)];
      await waitFor(`node ${port} to replicate ${masterId}`, async () => (await rawCommand(port, `CLUSTER REPLICATE ${masterId}`)).startsWith("+OK"));
    }
    for (const port of ports.slice(size)) {
      await waitFor(`replica ${port} linked to its master`, async () => bulkBody(await rawCommand(port, "INFO replication", 1000)).includes("master_link_status:up"), 30_000);
    }
    for (const port of ports) {
      await waitFor(
        `cluster_state:ok on ${port}`,
        async () => {
          const info = await rawCommand(port, "CLUSTER INFO");
          return info.includes("cluster_state:ok") && info.includes(`cluster_known_nodes:${total}`) && info.includes("cluster_slots_ok:16384");
        },
        30_000,
      );
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const nodes = ports.map((port, i) => ({
    port,
    get pid() {
      return children[i].pid!;
    },
    id: ids[i],
  }));
  const restart = async (port: number) => {
    const i = ports.indexOf(port);
    if (i < 0) throw new Error(`no node of this cluster listens on ${port}`);
    await killByPid(children[i], port); // nothing to do when a test killed it already
    children[i] = spawnNode(port);
    await waitFor(`cluster node on port ${port}`, async () => (await rawCommand(port, "PING")).startsWith("+PONG"));
  };
  return {
    ports,
    url: `redis-cluster://${ports.map((p) => `127.0.0.1:${p}`).join(",")}`,
    get pids() {
      return children.map((c) => c.pid!).filter(Boolean);
    },
    masters: nodes.slice(0, size),
    replicas: nodes.slice(size),
    restart,
    stop,
  };
}

/**
 * The port of the node currently serving `key` as master, asked of the node on `askPort` (`CLUSTER KEYSLOT`, then
 * `CLUSTER NODES`); undefined while no live master serves its slot (during a failover).
 */
export async function masterPortForKey(askPort: number, key: string): Promise<number | undefined> {
  const slot = Number(/^:(\d+)/.exec(await rawCommand(askPort, `CLUSTER KEYSLOT ${key}`, LOOKUP_TIMEOUT_MS))?.[1]);
  const nodes = bulkBody(await rawCommand(askPort, "CLUSTER NODES", LOOKUP_TIMEOUT_MS));
  for (const line of nodes.split("\n")) {
    const [, address, flags, , , , , state, ...ranges] = line.trim().split(" ");
    if (!address || !flags.split(",").includes("master") || /fail|handshake|noaddr/.test(flags) || state !== "connected") continue;
    const served = ranges.some((r) => {
      if (r.startsWith("[")) return false; // a slot being migrated
      const [from, to = from] = r.split("-").map(Number);
      return slot >= from && slot <= to;
    });
    if (served) return Number(address.split("@")[0].split(":")[1]);
  }
  return undefined;
}

/**
 * Of the servers on `ports`, the first whose clients include a pattern subscriber (`psub=` in CLIENT LIST): where a
 * process's Pub/Sub connection went (ioredis picks a Cluster's subscriber node itself). Undefined when none has one.
 */
export async function patternSubscriberPort(ports: number[]): Promise<number | undefined> {
  for (const port of ports) if (/ psub=[1-9]/.test(bulkBody(await rawCommand(port, "CLIENT LIST", LOOKUP_TIMEOUT_MS)))) return port;
  return undefined;
}

/** A hash tag (`{prefix-n}`) whose keys the master on `port` serves, as the node on `askPort` sees the slots. */
export async function hashTagOn(port: number, prefix: string, askPort = port): Promise<string> {
  for (let n = 0; ; n++) if ((await masterPortForKey(askPort, `{${prefix}-${n}}x`)) === port) return `{${prefix}-${n}}`;
}

/**
 * Waits until a live master other than the one on `oldPort` serves `key`, as the node on `askPort` sees it (a
 * failover: the slot is served by nobody for a moment first), and returns its port.
 */
export async function promotedMasterPort(askPort: number, key: string, oldPort: number, timeoutMs = 20_000): Promise<number> {
  let port: number | undefined;
  await waitFor(`a master other than ${oldPort} to serve ${key}`, async () => {
    port = await masterPortForKey(askPort, key);
    return port !== undefined && port !== oldPort;
  }, timeoutMs);
  return port!;
}
