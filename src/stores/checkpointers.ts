/**
 * LangGraph checkpointers whose thread files live in a content store beside their tables
 * (content-serializer.ts): what a mount's state route and the agent sharing its thread both
 * use, so that neither stores every file again with every checkpoint.
 *
 *   const checkpointer = await sqliteCheckpointer(new Database("./.backendfs/agent.db"));
 *   const agent = createDeepAgent({ model, backend: new StateBackend(), checkpointer });
 *
 * Storage "inline" writes LangGraph's own format: checkpoints any stock SqliteSaver /
 * PostgresSaver reads, at the cost of a copy of every file per checkpoint. Either reads both
 * formats, so a route can be switched either way on a thread that has both.
 *
 * One FilesManifest per database, shared by its saver and its fast reader in one process:
 * what one decoded or encoded, the other recognises (the same FileData objects).
 */
import type Database from "better-sqlite3";
import type pg from "pg";
import type { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import type { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { ContentStore, PostgresBlobStorage, SqliteBlobStorage, type BlobStorage } from "./content-store.js";
import { FilesManifest } from "./files-manifest.js";

/** How a state route's checkpoints hold file content. */
export type StateStorage = "content" | "inline";

const manifests = new WeakMap<object, FilesManifest>();

/** The one manifest codec of a database connection (a SQLite handle, a pg pool). */
function manifestOf(connection: object, storage: () => BlobStorage): FilesManifest {
  let manifest = manifests.get(connection);
  if (!manifest) {
    manifest = new FilesManifest(new ContentStore(storage()));
    manifests.set(connection, manifest);
  }
  return manifest;
}

/** The content store's manifest codec of a SQLite database (its table is created on first use). */
export const sqliteFilesManifest = (db: Database.Database): FilesManifest => manifestOf(db, () => new SqliteBlobStorage(db));

export const postgresFilesManifest = (pool: pg.Pool): FilesManifest => manifestOf(pool, () => new PostgresBlobStorage(pool));

/** A SqliteSaver on `db` whose files live in the content store (or inline, LangGraph's format); it reads both. */
export async function sqliteCheckpointer(db: Database.Database, options: { storage?: StateStorage } = {}): Promise<SqliteSaver> {
  const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
  const { ContentSerializer } = await import("./content-serializer.js");
  return new SqliteSaver(db, new ContentSerializer(sqliteFilesManifest(db), undefined, options.storage !== "inline"));
}

/** A PostgresSaver on `pool`, set up, whose files live in the content store (or inline). */
export async function postgresCheckpointer(pool: pg.Pool, options: { storage?: StateStorage } = {}): Promise<PostgresSaver> {
  const { PostgresSaver } = await import("@langchain/langgraph-checkpoint-postgres");
  const { ContentSerializer } = await import("./content-serializer.js");
  const saver = new PostgresSaver(pool, new ContentSerializer(postgresFilesManifest(pool), undefined, options.storage !== "inline"));
  const { underMigrationLock } = await import("./pg-transaction.js");
  await underMigrationLock(pool, () => saver.setup());
  return saver;
}
