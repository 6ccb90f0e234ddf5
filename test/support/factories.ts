/** Fresh-backend factories of backendfs' own backends, shared by conformance, property and interop tests. */
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import Database from "better-sqlite3";
import { LocalShellBackend } from "../../src/backends/local-shell.js";
import { StoreBackend } from "../../src/backends/store.js";
import { SqliteStore } from "../../src/stores/sqlite-store.js";
import { FilesystemBackend } from "../../src/backends/filesystem.js";
import { StateBackend } from "../../src/backends/state.js";
import { CompositeBackend } from "../../src/backends/composite.js";
import { ThreadStateBackend } from "../../src/stores/thread-state.js";
import { SqliteCheckpointReader } from "../../src/stores/sqlite-checkpoint-reader.js";
import { sqliteCheckpointer, sqliteFilesManifest, type StateStorage } from "../../src/stores/checkpointers.js";
import type { AnyBackendProtocol } from "../../src/protocol/index.js";
import { compositeFactory, graphHarness, hostPaths, legacyStateHarness, makeTempRoot, plainHarness } from "./harness.js";
import type { HarnessFactory } from "./harness.js";

export const stateInGraph: HarnessFactory = async () => graphHarness(new StateBackend());

export const stateLegacy: HarnessFactory = async () => legacyStateHarness((runtime) => new StateBackend(runtime));

export const storeInMemory: HarnessFactory = async () =>
  plainHarness(new StoreBackend({ store: new InMemoryStore(), namespace: ["conformance"] }));

/** A StoreBackend on our SqliteStore in a temp directory. */
export const storeSqlite: HarnessFactory = async () => {
  const tmp = await makeTempRoot();
  const store = new SqliteStore(`${tmp.base}/store.db`);
  return plainHarness(new StoreBackend({ store, namespace: ["conformance"] }), {
    cleanup: async () => {
      await store.stop();
      await tmp.remove();
    },
  });
};

export const localShell: HarnessFactory = async () => {
  const tmp = await makeTempRoot();
  return plainHarness(new LocalShellBackend({ rootDir: tmp.root, virtualMode: true }), { rootDir: tmp.root, cleanup: tmp.remove });
};

export function filesystem(virtualMode: boolean, ripgrep?: boolean): HarnessFactory {
  return async () => {
    const tmp = await makeTempRoot();
    const backend = new FilesystemBackend({ rootDir: tmp.root, virtualMode, ...(ripgrep === undefined ? {} : { ripgrep }) });
    return plainHarness(backend, { rootDir: tmp.root, cleanup: tmp.remove, ...(virtualMode ? {} : hostPaths(tmp.root)) });
  };
}

/** A ThreadStateBackend bound to a thread of a SQLite checkpointer in a temp directory. */
/** ThreadStateBackend on SQLite as a mount opens it: the saver with `storage`, and the fast reader. */
const threadStateOnSqlite =
  (storage: StateStorage): HarnessFactory =>
  async () => {
    const tmp = await makeTempRoot();
    const db = new Database(`${tmp.base}/checkpoints.db`);
    db.pragma("journal_mode = WAL");
    const saver = await sqliteCheckpointer(db, { storage });
    const reader = new SqliteCheckpointReader(db, sqliteFilesManifest(db));
    const backend = new ThreadStateBackend({ checkpointer: saver, reader, threadId: "conformance", batchWindowMs: 0 });
    return plainHarness(backend, {
      cleanup: async () => {
        db.close();
        await tmp.remove();
      },
    });
  };
export const threadStateSqlite = threadStateOnSqlite("content");
export const threadStateSqliteInline = threadStateOnSqlite("inline");

export const composite = (inner: HarnessFactory, fallback?: HarnessFactory): HarnessFactory =>
  compositeFactory(inner, (d, routes) => new CompositeBackend(d, routes as Record<string, AnyBackendProtocol>), fallback);
