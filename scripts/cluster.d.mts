// Types of scripts/cluster.mjs (the launcher is plain JavaScript so that `npm run start:cluster` needs no compiler).

export interface ProcessPorts {
  port: number;
  grpcPort: number;
  managementPort: number;
}

/** One started process or Redis node as recorded in pids.json. */
export interface ClusterProcess extends Partial<ProcessPorts> {
  name: string;
  pid: number;
  /** What its /proc/<pid>/cmdline contains: the check before any signal (PIDs get reused). */
  marker: string;
  log: string;
  kind?: string;
  port?: number;
  /** How it was started (what a restart runs again): the command, its arguments, the environment added to ours. */
  command: string;
  args: string[];
  env: Record<string, string>;
}

export interface StartClusterOptions {
  dir?: string;
  basePort?: number;
  superPassword?: string;
  build?: boolean;
  env?: Record<string, string>;
  nodeTimeoutMs?: number;
  log?: (line: string) => void;
}

export interface RunningCluster {
  dir: string;
  basePort: number;
  superPassword: string;
  redisUrl: string;
  ports: { redis: number[]; processes: Record<string, ProcessPorts> };
  gateways: string[];
  get(name: string): ClusterProcess | undefined;
  processes(): ClusterProcess[];
  kill(name: string, signal?: NodeJS.Signals): void;
  restart(name: string): Promise<void>;
  stop(): Promise<void>;
}

export function clusterPorts(basePort: number): { redis: number[]; processes: Record<string, ProcessPorts> };
export function allPorts(basePort: number): number[];
export function findFreeBasePort(): Promise<number>;
export function redisCommand(port: number, command: string, timeoutMs?: number): Promise<string>;
export function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs?: number): Promise<void>;
export function isOurs(pid: number, marker: string): boolean;
export function stopPid(pid: number, marker: string, graceMs?: number): Promise<boolean>;
export function lastLogLine(logFile: string, msg: string): Record<string, unknown> & { time: number; msg: string } | undefined;
export function startCluster(options?: StartClusterOptions): Promise<RunningCluster>;
export function stopCluster(options?: { dir?: string; graceMs?: number; log?: (line: string) => void }): Promise<void>;
/** Starts a stopped process or Redis node again as first started, recording its new PID; resolves with its record once ready. */
export function restartRecorded(name: string, options?: { dir?: string }): Promise<ClusterProcess>;
