#!/usr/bin/env node
// `npm start` and friends: runs a process of the product from its compiled JavaScript.
// With dev dependencies installed, it first rebuilds what changed (`npm run build` is incremental); on a tree
// installed with `npm ci --omit=dev` there is no compiler, so it runs the dist/ that `npm run build` left.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { buildOrder } from "./build.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The process kinds `npm start <kind>` can run, each a compiled entry point. */
const ENTRIES = {
  "all-in-one": "apps/dist/main.js",
  gateway: "apps/dist/main.js",
  config: "services/config/dist/main.js",
  registry: "services/registry/dist/main.js",
  stats: "services/stats/dist/main.js",
  worker: "services/stats/dist/worker/main.js",
  security: "services/security/dist/main.js",
};

/** The newest change below `dir`: files, and folders too (deleting or renaming a source file changes its folder). */
function newestMtime(dir) {
  let newest = statSync(dir).mtimeMs;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "dist" || entry.name === "node_modules") continue;
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** A workspace whose sources (src/, or the workspace itself for apps/) changed after its last build, or never built. */
function stale(dir) {
  const info = join(root, dir, "dist", ".tsbuildinfo");
  const sources = existsSync(join(root, dir, "src")) ? join(root, dir, "src") : join(root, dir);
  return !existsSync(info) || newestMtime(sources) > statSync(info).mtimeMs;
}

const kind = process.argv[2] ?? "all-in-one";
const entry = ENTRIES[kind];
if (!entry) {
  console.error(`unknown process kind "${kind}": use one of ${Object.keys(ENTRIES).join(", ")}`);
  process.exit(2);
}
const canBuild = existsSync(join(root, "node_modules", ".bin", "tsc"));
if (canBuild && buildOrder().some(stale)) {
  console.error("building (npm run build) …");
  execFileSync(process.execPath, [join(root, "scripts", "build.mjs")], { stdio: "inherit" });
} else if (!existsSync(join(root, entry))) {
  console.error(`${entry} is missing: run "npm run build" before installing with --omit=dev`);
  process.exit(1);
}
await import(pathToFileURL(join(root, entry)).href);
