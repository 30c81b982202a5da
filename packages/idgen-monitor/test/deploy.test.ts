import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { IDGEN_METRIC_NAMES } from "../src/index.js";
import { promtool } from "./helpers.js";

const deploy = join(dirname(fileURLToPath(import.meta.url)), "../../../deploy");
const tool = promtool();
const run = (args: string[]) => execFileSync(tool!, args, { cwd: deploy, encoding: "utf8", stdio: "pipe" });

describe("deploy/: Prometheus scrape config, idgen alerts and the Grafana dashboard", () => {
  it("prometheus.yml scrapes every process kind on its management port", () => {
    const config = parseYaml(readFileSync(join(deploy, "prometheus.yml"), "utf8")) as { scrape_configs: { job_name: string; metrics_path: string; static_configs: { targets: string[] }[] }[] };
    const ports = Object.fromEntries(config.scrape_configs.map((j) => [j.job_name, j.static_configs.flatMap((s) => s.targets.map((t) => t.split(":")[1]))]));
    expect(ports).toEqual({
      "gov-gateway": ["8081", "8081"],
      "gov-config-service": ["8191"],
      "gov-registry-service": ["8192"],
      "gov-stats-service": ["8193"],
      "gov-stats-worker": ["8194", "8194"],
      "gov-security-service": ["8195"],
    });
    for (const job of config.scrape_configs) expect(job.metrics_path).toBe("/metrics");
  });

  it.skipIf(!tool)("promtool: config and rules valid, and the alerts fire when they should (promtool test rules)", () => {
    expect(run(["check", "config", "prometheus.yml"])).toContain("SUCCESS");
    expect(run(["check", "rules", "prometheus/idgen-alerts.yml"])).toContain("SUCCESS: 4 rules found");
    expect(run(["test", "rules", "prometheus/idgen-alerts.test.yml"])).toContain("SUCCESS");
  });

  it("the alerts cover lease down, stop deadline near and prefetch failing, on metric names the monitor exports", () => {
    const rules = parseYaml(readFileSync(join(deploy, "prometheus/idgen-alerts.yml"), "utf8")) as { groups: { rules: { alert: string; expr: string }[] }[] };
    const alerts = rules.groups.flatMap((g) => g.rules);
    expect(alerts.map((a) => a.alert)).toEqual(expect.arrayContaining(["IdgenLeaseDown", "IdgenStopDeadlineNear", "IdgenPrefetchFailing"]));
    for (const { alert, expr } of alerts) {
      for (const name of expr.match(/idgen_[a-z_]+/g) ?? []) expect(IDGEN_METRIC_NAMES as readonly string[], `${alert}: ${name}`).toContain(name);
    }
  });

  it("the Grafana dashboard is valid JSON with a panel on every idgen family", () => {
    const dashboard = JSON.parse(readFileSync(join(deploy, "grafana/idgen-dashboard.json"), "utf8")) as { panels: { title: string; targets: { expr: string }[] }[] };
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)).join("\n");
    for (const name of IDGEN_METRIC_NAMES) expect(exprs, name).toMatch(new RegExp(`\\b${name}\\b`));
    for (const p of dashboard.panels) expect(p.title).toBeTruthy();
  });
});
