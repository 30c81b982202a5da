#!/usr/bin/env node
// Used by deploy/Dockerfile's build stage: copies what the runtime stage needs into <out> — the root package.json and
// package-lock.json (for `npm ci --omit=dev`), scripts/ (`node scripts/start.mjs <kind>`), and of every workspace its
// package.json and dist/ (compiled JavaScript; no sources, no tests). The workspaces come from package.json, so a new
// one is picked up without editing this file.
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const out = process.argv[2];
if (!out) {
  console.error("usage: node deploy/docker/runtime-tree.mjs <output directory>");
  process.exit(2);
}

/** The workspace folders package.json names (`packages/*` expands to its subfolders that have a package.json). */
function workspaceDirs() {
  const { workspaces } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  return workspaces.flatMap((pattern) =>
    pattern.endsWith("/*")
      ? readdirSync(join(root, pattern.slice(0, -2)), { withFileTypes: true })
          .filter((d) => d.isDirectory() && existsSync(join(root, pattern.slice(0, -2), d.name, "package.json")))
          .map((d) => `${pattern.slice(0, -2)}/${d.name}`)
      : [pattern],
  );
}

mkdirSync(out, { recursive: true });
for (const file of ["package.json", "package-lock.json", ".npmrc"]) if (existsSync(join(root, file))) cpSync(join(root, file), join(out, file));
cpSync(join(root, "scripts"), join(out, "scripts"), { recursive: true });
for (const dir of workspaceDirs()) {
  mkdirSync(join(out, dir), { recursive: true });
  cpSync(join(root, dir, "package.json"), join(out, dir, "package.json"));
  if (existsSync(join(root, dir, "dist"))) cpSync(join(root, dir, "dist"), join(out, dir, "dist"), { recursive: true });
}
console.log(`runtime tree in ${out}: ${workspaceDirs().length} workspaces`);
