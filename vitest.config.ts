import { defineConfig } from "vitest/config";

// Workspaces export their built dist/ by default and their TypeScript sources under the "@gov/source" condition:
// tests run on the sources, and so do the processes they spawn (`node --import tsx …` inherits NODE_OPTIONS).
const SOURCE = "@gov/source";
if (!process.env.NODE_OPTIONS?.includes(`--conditions=${SOURCE}`)) {
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ""} --conditions=${SOURCE}`.trim();
}

export default defineConfig({
  resolve: { conditions: [SOURCE] },
  ssr: { resolve: { conditions: [SOURCE] } },
  test: {
    include: ["{packages,services,gateway}/*/test/**/*.test.ts", "{packages,services,gateway}/*/src/**/*.test.ts", "gateway/test/**/*.test.ts", "gateway/src/**/*.test.ts", "deploy/test/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    globalSetup: ["packages/testkit/src/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two test files at a time. Vitest's default on a 2-core machine is one (cores − 1): the suite then ran every file
    // in turn, ~11 of CI's 15 minutes. Most files wait on Redis and child processes rather than compute; with two
    // forks the same suite took 9 minutes on a machine loaded by other work, where one fork took 16. Stall checks
    // count a test's own CPU time (stallMonitor), not time the other fork had the CPU.
    maxWorkers: 2,
    reporters: process.env.CI === "true" ? ["default", ["json", { outputFile: ".tmp/vitest-results.json" }]] : ["default"],
  },
});
