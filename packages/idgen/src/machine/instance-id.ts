import { hostname, networkInterfaces } from "node:os";

/** The last non-internal IPv4 address, else the host name (as CosId's local host supplier). */
export function hostAddress(): string {
  let found: string | undefined;
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal) found = a.address;
  }
  return found ?? hostname();
}

/**
 * `host:port`, or `host:pid` without a port. A configured `idgen.machine.instance-id` wins.
 * Note: the redis distributor gives an instance the id it already holds, so two live processes must never
 * share an instance id (in containers where the pid is 1, configure a port or an explicit instance id).
 */
export function defaultInstanceId(opts: { port?: number; host?: string } = {}): string {
  return `${opts.host ?? hostAddress()}:${opts.port && opts.port > 0 ? opts.port : process.pid}`;
}
