import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["{packages,services,gateway}/*/test/**/*.test.ts", "{packages,services,gateway}/*/src/**/*.test.ts", "gateway/test/**/*.test.ts", "gateway/src/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    globalSetup: ["packages/testkit/src/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    reporters: process.env.CI === "true" ? ["default", ["json", { outputFile: ".tmp/vitest-results.json" }]] : ["default"],
  },
});
