#!/usr/bin/env node
// `npm run build`: compiles every workspace's src/ into dist/ (JS + .d.ts), dependencies first. The order comes from
// the workspaces' own package.json dependencies on each other, so there is no second list to keep in step.
// Incremental: an unchanged workspace costs a timestamp check. Exit code 1 on a type error.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, utimesSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Workspaces that have a tsconfig.build.json, in dependency order. */
export function buildOrder() {
  const { workspaces } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const byName = new Map();
  for (const pattern of workspaces) {
    const dirs = pattern.endsWith("/*")
      ? execFileSync("ls", [join(root, pattern.slice(0, -2))], { encoding: "utf8" }).split("\n").filter(Boolean).map((d) => join(pattern.slice(0, -2), d))
      : [pattern];
    for (const dir of dirs) {
      if (!existsSync(join(root, dir, "tsconfig.build.json"))) continue;
      const pkg = JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8"));
      byName.set(pkg.name, { dir, deps: Object.keys(pkg.dependencies ?? {}) });
    }
  }
  const order = [];
  const state = new Map();
  const visit = (name, path) => {
    if (state.get(name) === "done") return;
    if (state.get(name) === "visiting") throw new Error(`workspace dependency cycle: ${[...path, name].join(" → ")}`);
    state.set(name, "visiting");
    for (const dep of byName.get(name).deps) if (byName.has(dep)) visit(dep, [...path, name]);
    state.set(name, "done");
    order.push(byName.get(name).dir);
  };
  for (const name of [...byName.keys()].sort()) visit(name, []);
  return order;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const tsc = join(root, "node_modules", ".bin", "tsc");
  for (const dir of buildOrder()) {
    try {
      execFileSync(tsc, ["-p", join(root, dir, "tsconfig.build.json")], { stdio: "inherit" });
      // tsc leaves its build info alone when nothing changed; mark the build as current so that `npm start` (which
      // compares it with the sources' times) does not run the compiler again for a touched but unchanged file
      const now = new Date();
      utimesSync(join(root, dir, "dist", ".tsbuildinfo"), now, now);
    } catch {
      console.error(`build failed in ${dir}`);
      process.exit(1);
    }
  }
}
