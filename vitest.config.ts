import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // FUSE mounts and servers are per-file; two cores do not gain from more workers.
    pool: "forks",
    maxWorkers: 2,
    reporters: ["default", "json"],
    outputFile: { json: ".test-report/vitest.json" },
  },
});
