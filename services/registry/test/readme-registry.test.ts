import { execFile, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryRegistryStore } from "../src/store/memory-registry-store.js";
import type { RegistryStore } from "../src/store/registry-store.js";
import { createRegistryGateway, type RegistryGateway } from "./harness.js";

const run = promisify(execFile);
const root = join(dirname(fileURLToPath(import.meta.url)), "../../..");

/** The first ```bash block of the README's "Service registry" section, one command per entry (continuations joined). */
function registryCommands(): string[] {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Service registry"));
  const block = /```bash\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('README.md: no ```bash block in the section "Service registry"');
  return block
    .replace(/\\\n\s*/g, "")
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.trimStart().startsWith("#"))
    .map((line) => {
      const at = line.search(/\s{2,}#\s/);
      return (at < 0 ? line : line.slice(0, at)).trim();
    });
}

const instance = { instanceId: "order@http#10.0.0.1#8080", serviceId: "order", schema: "http", host: "10.0.0.1", port: 8080, weight: 1, isEphemeral: true };
/** What each command must print, by the command as the README writes it (every command must have a check). */
const CHECKS: Record<string, (out: string) => void> = {
  'curl -X PUT -H \'content-type: application/json\' -d \'{"schema":"http","host":"10.0.0.1","port":8080,"metadata":{"zone":"a"}}\' $S/order/instances': (out) => expect(out).toBe("true"),
  'curl -X PUT -H \'content-type: application/json\' -d \'{"schema":"http","host":"10.0.0.2","port":8080,"weight":3,"ttl":"30s"}\' $S/order/instances': (out) => expect(out).toBe("true"),
  "curl $S/order/instances": (out) => expect(JSON.parse(out)[0]).toEqual({ ...instance, ttlAt: expect.stringMatching(/^2\d{3}-.*Z$/), metadata: { zone: "a" }, isExpired: false }),
  "curl -X PUT $I/renew": (out) => expect(out).toBe("true"),
  'curl -X PUT -H \'content-type: application/json\' -d \'{"zone":"b"}\' $I/metadata': (out) => expect(out).toBe("true"),
  "curl -X PUT -H 'content-type: application/json' -d '{}' $I/metadata": (out) => expect(out).toBe("true"),
  "curl $S/order/lb": (out) => expect(["10.0.0.1", "10.0.0.2"]).toContain(JSON.parse(out).host),
  "curl $S": (out) => expect(JSON.parse(out)).toEqual(["order"]),
  "curl $S/stats": (out) => expect(JSON.parse(out)).toEqual([{ serviceId: "order", instanceCount: 2 }]),
  "curl -X PUT $S/payment": (out) => expect(out).toBe("true"),
  "curl -X DELETE $I": (out) => expect(out).toBe("true"),
  "curl -X DELETE $S/payment": (out) => expect(out).toBe("true"),
  // each event's id is its hash (JSON puts a long list of messages last)
  "curl -N $S/order/instances/watch": (out) => expect(out).toMatch(/^id: ([0-9a-f]{64})\ndata: \{"op":"current","serviceId":"order","instanceId":"","hash":"\1","instances":\[\{"instanceId":"order@http#10.0.0.2#8080"/m),
  "curl -N $S/watch": (out) => {
    // the id is the digest of the list the event leaves the client with (the README prints it for ["order"])
    expect(out).toMatch(/^id: 3eeb7e96e59ce40f9cb1a089daba079fd699f6867a30f6634af8570967b2375a\ndata: \{"op":"current","serviceId":"","serviceIds":\["order"\],"hash":"3eeb7e96e59ce40f9cb1a089daba079fd699f6867a30f6634af8570967b2375a"\}$/m);
  },
};

/** Runs a command that never ends by itself (a watch) until what it printed passes `check`; then stops it. */
function untilPrinted(command: string, env: NodeJS.ProcessEnv, check: (out: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", `exec ${command}`], { env, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    let failure: unknown;
    const timer = setTimeout(() => (child.kill(), reject(failure ?? new Error(`${command}: printed nothing`))), 10_000);
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      try {
        check(out);
      } catch (err) {
        failure = err; // not yet: the first event may still be on its way
        return;
      }
      clearTimeout(timer);
      child.kill();
      resolve();
    });
  });
}

describe("README: the registry's curl examples", () => {
  let gw: RegistryGateway;
  let store: RegistryStore;
  let url: string;
  beforeAll(async () => {
    store = createMemoryRegistryStore();
    gw = await createRegistryGateway(store);
    ({ url } = await gw.listen());
  });
  afterAll(async () => gw?.close());

  it("every command runs against a real registry and prints what its comment says", async () => {
    const commands = registryCommands();
    // $H is the login's Authorization header in the README; this registry runs without security, so any header will do
    const env: Record<string, string> = { H: "X-Readme: registry" };
    const checked: string[] = [];
    for (const command of commands) {
      const assignment = /^([A-Z]+)=(\S+)$/.exec(command);
      if (assignment) {
        env[assignment[1]] = assignment[2].replace("http://localhost:8080", url).replace(/\$([A-Z]+)/g, (_, name: string) => env[name]);
        continue;
      }
      const key = command.replace(/^curl -H "\$H" /, "curl ");
      // service stats are the counts of the last statistics pass (the stats worker's sweep): run one, as the worker would
      if (key === "curl $S/stats") await store.sweep("{dev}", Date.now());
      const check = CHECKS[key];
      expect(check, `no check for the README command: ${command}`).toBeDefined();
      if (key.startsWith("curl -N ")) await untilPrinted(command.replace(/^curl /, "curl -s "), { ...process.env, ...env }, check);
      else check((await run("bash", ["-c", command.replace(/^curl /, "curl -sS ")], { env: { ...process.env, ...env } })).stdout.trim());
      checked.push(key);
    }
    expect(checked.sort()).toEqual(Object.keys(CHECKS).sort());
  }, 30_000);
});
