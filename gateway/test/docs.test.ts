import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { endpointSettings } from "@gov/service-kit";
import { envName, loadSettings, readSettingsSources } from "@gov/settings";
import { describe, expect, it } from "vitest";
import { platform } from "../../apps/platform.js";
import { gatewaySettings } from "../src/index.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
// Every settings group a process of the product reads: the gateway's, and each module's own and endpoint settings,
// taken from the all-in-one module list (a new service is covered by its line there). Groups stay apart: several
// define e.g. `port` under different names.
const groups = [gatewaySettings, ...platform.modules.flatMap((m) => [m.settings, endpointSettings(m.name, m.ports)])];
const defs = groups.flatMap((g) => Object.values(g) as { name: string }[]);

describe("the documentation cannot drift from the settings", () => {
  it("every setting the processes read has a row in the README's settings table", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    for (const def of defs) expect(readme, def.name).toContain(`| \`${def.name}\``);
  });

  it("deploy/gov.example.yaml loads and states exactly the defaults", () => {
    const sources = readSettingsSources({ GOV_CONFIG: join(root, "deploy/gov.example.yaml") });
    for (const group of groups) {
      expect(loadSettings(group, sources)).toEqual(loadSettings(group, { file: {}, env: {} }));
    }
    // every key in the file is a setting we know (a typo there would silently do nothing)
    const known = new Set(defs.map((d) => d.name));
    for (const key of Object.keys(sources.file)) expect(known, key).toContain(key);
    expect(envName("gov.limits.zip-upload")).toBe("GOV_LIMITS_ZIP_UPLOAD");
  });

  it("deploy/gov.example.yaml names every setting, set to its default or commented out (deploy/README.md: it lists every setting)", () => {
    // A commented-out key (`# token: …`, no default to state) counts: uncomment such lines and read the file again.
    const text = readFileSync(join(root, "deploy/gov.example.yaml"), "utf8").replace(/^(\s*)# ([A-Za-z_][\w.-]*:)/gm, "$1$2");
    const dir = mkdtempSync(join(tmpdir(), "gov-example-"));
    try {
      writeFileSync(join(dir, "gov.yaml"), text);
      const named = new Set(Object.keys(readSettingsSources({ GOV_CONFIG: join(dir, "gov.yaml") }).file));
      const missing = [...new Set(defs.map((d) => d.name))].filter((name) => !named.has(name));
      expect(missing, "settings missing from deploy/gov.example.yaml").toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
