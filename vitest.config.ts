import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
    // The shared PostgreSQL tables, created once before the workers start (parallel
    // PostgresSaver/PostgresStore migrations on a fresh database collide).
    globalSetup: ["test/support/pg-global-setup.ts"],
    // Vitest's mocks reach only modules its runner loads; inlined, deepagents sees a test's
    // vi.mock of @langchain/langgraph (test/unit/langgraph-mocks.test.ts compares with it).
    server: { deps: { inline: ["deepagents"] } },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // FUSE mounts and servers are per-file; two cores do not gain from more workers.
    pool: "forks",
    maxWorkers: 2,
    reporters: ["default", "json"],
    outputFile: { json: ".test-report/vitest.json" },
  },
});
