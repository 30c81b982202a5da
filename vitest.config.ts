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
    reporters: process.env.CI === "true" ? ["default", ["json", { outputFile: ".tmp/vitest-results.json" }]] : ["default"],
  },
});
