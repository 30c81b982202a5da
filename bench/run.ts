/**
 * `npm run bench [filter]`: runs every `bench/*.bench.ts` (or those whose name contains the filter), one at a
 * time in its own process so that one benchmark's heap and timers never colour the next one's numbers.
 * Each benchmark measures its own baseline in the same run and prints ratios against it. The production build is
 * brought up to date first (BENCH_RUNNER=tsx: the sources instead).
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const filter = process.argv[2] ?? "";
const files = readdirSync(here)
  .filter((f) => f.endsWith(".bench.ts") && f.includes(filter))
  .sort();
if (files.length === 0) {
  console.error(`no benchmark matches "${filter}"; available: ${readdirSync(here).filter((f) => f.endsWith(".bench.ts")).join(", ")}`);
  process.exit(1);
}
// The benchmarks measure the product as `npm start` runs it, the production build (see productRunner in
// fixtures/wrk-servers.ts): bring it up to date first (incremental; seconds when nothing changed).
if (process.env.BENCH_RUNNER !== "tsx") {
  const built = spawnSync(process.execPath, [join(here, "../scripts/build.mjs")], { stdio: "inherit" });
  if (built.status !== 0) process.exit(1);
}
let failed = 0;
for (const file of files) {
  console.log(`\n### ${file}\n`);
  const r = spawnSync(process.execPath, ["--import", "tsx", join(here, file)], { stdio: "inherit" });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
