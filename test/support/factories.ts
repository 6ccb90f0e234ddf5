/** Fresh-backend factories of backendfs' own backends, shared by conformance, property and interop tests. */
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { StateBackend } from "../../src/backends/state.js";
import { CompositeBackend } from "../../src/backends/composite.js";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import type { AnyBackendProtocol } from "../../src/protocol/index.js";
import { compositeFactory, graphHarness, hostPaths, legacyStateHarness, makeTempRoot, plainHarness } from "./harness.js";
import type { HarnessFactory } from "./harness.js";

export const stateInGraph: HarnessFactory = async () => graphHarness(new StateBackend());

export const stateLegacy: HarnessFactory = async () => legacyStateHarness((runtime) => new StateBackend(runtime));

export function filesystem(virtualMode: boolean, ripgrep?: boolean): HarnessFactory {
  return async () => {
    const tmp = await makeTempRoot();
    const backend = new FilesystemBackend({ rootDir: tmp.root, virtualMode, ...(ripgrep === undefined ? {} : { ripgrep }) });
    return plainHarness(backend, { rootDir: tmp.root, cleanup: tmp.remove, ...(virtualMode ? {} : hostPaths(tmp.root)) });
  };
}

/** A ThreadStateBackend bound to a thread of a SQLite checkpointer in a temp directory. */
export const threadStateSqlite: HarnessFactory = async () => {
  const tmp = await makeTempRoot();
  const saver = SqliteSaver.fromConnString(`${tmp.base}/checkpoints.db`);
  const backend = new ThreadStateBackend({ checkpointer: saver, threadId: "conformance", batchWindowMs: 0 });
  return plainHarness(backend, {
    cleanup: async () => {
      (saver as unknown as { db: { close(): void } }).db.close();
      await tmp.remove();
    },
  });
};

export const composite = (inner: HarnessFactory, fallback?: HarnessFactory): HarnessFactory =>
  compositeFactory(inner, (d, routes) => new CompositeBackend(d, routes as Record<string, AnyBackendProtocol>), fallback);
