/**
 * Database connections named by connection strings (`sqlite:./agent.db`,
 * `postgres://user:pass@host/db`), opened once per target and shared by every route that
 * names it; `close()` ends them all.
 */
import { mkdirSync } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { dirname, isAbsolute, resolve } from "node:path";
import Database from "better-sqlite3";
import type pg from "pg";
import type { BaseCheckpointSaver, BaseStore } from "@langchain/langgraph-checkpoint";
import { SqliteCheckpointReader } from "../stores/sqlite-checkpoint-reader.js";
import { sqliteFilesManifest, type StateStorage } from "../stores/checkpointers.js";
import { PostgresHistory, SqliteHistory, type CheckpointHistory } from "../stores/history-pruner.js";
import type { CheckpointReader } from "../stores/thread-checkpoints.js";
import type { NodeTable } from "../stores/node-table.js";
import { PostgresCommitLock, SqliteCommitLock, type CommitLock } from "../stores/commit-lock.js";

export type Connection = { kind: "sqlite"; file: string } | { kind: "postgres"; url: string };

/** Parses a connection string; relative SQLite paths resolve against `baseDir`. */
export function parseConnection(text: string, baseDir: string): Connection {
  if (text.startsWith("sqlite:")) {
    const path = text.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (path === "") throw new Error(`Empty SQLite path in ${JSON.stringify(text)}`);
    return { kind: "sqlite", file: isAbsolute(path) ? path : resolve(baseDir, path) };
  }
  if (/^postgres(ql)?:\/\//.test(text)) return { kind: "postgres", url: text };
  throw new Error(`Unsupported connection string ${JSON.stringify(redactUrl(text))}: expected sqlite:PATH or postgres://…`);
}

/** The URL with its password replaced by ***, for error messages. */
export function redactUrl(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*):[^@/]*@/i, "$1:***@");
}

const describe = (c: Connection): string => (c.kind === "sqlite" ? `sqlite:${c.file}` : redactUrl(c.url));

/** The password never reaches an error message, even when pg quotes the URL. */
function wrapError(c: Connection, error: unknown): Error {
  const raw = error instanceof Error ? error.message : String(error);
  const message = c.kind === "postgres" ? raw.split(c.url).join(redactUrl(c.url)) : raw;
  return new Error(`Cannot open ${describe(c)}: ${message || (error as { code?: string }).code || "unknown error"}`);
}

/**
 * A checkpointer as a ThreadStateBackend takes it: the saver behind a loader, because
 * SqliteSaver's module loads most of LangChain (a second of CLI start-up), and for SQLite a
 * reader that serves reads straight from the saver's table without it.
 */
export interface CheckpointerHandle {
  saver: () => Promise<BaseCheckpointSaver>;
  reader?: CheckpointReader;
  /** Makes every committed checkpoint durable against power loss (SQLite: an fsync of the WAL). */
  durable?: () => Promise<void>;
  /** Serializes commits with other processes on the same database (commit-lock.ts). */
  commitLock: CommitLock;
  /** Prunes superseded commits and sweeps unnamed content (history-pruner.ts). */
  history: CheckpointHistory;
}

export class Connections {
  private readonly sqlite = new Map<string, Database.Database>();
  private readonly savers = new Map<string, CheckpointerHandle>();
  private readonly stores = new Map<string, BaseStore>();
  private readonly pools = new Map<string, pg.Pool>();
  private readonly closers: Array<() => unknown> = [];

  /** `storage`: how the checkpoints it writes hold file content (checkpointers.ts); either is read. */
  async checkpointer(c: Connection, storage: StateStorage = "content"): Promise<CheckpointerHandle> {
    const id = `${storage}\0${describe(c)}`;
    const known = this.savers.get(id);
    if (known) return known;
    let handle: CheckpointerHandle;
    try {
      if (c.kind === "sqlite") {
        const db = await whileBusy(() => this.sqliteDb(c.file));
        // The reader queries the file now, so a bad file fails here rather than at first use.
        const reader = await whileBusy(() => new SqliteCheckpointReader(db, sqliteFilesManifest(db)));
        let saver: Promise<BaseCheckpointSaver> | undefined;
        const load = () => {
          saver ??= import("../stores/checkpointers.js").then(({ sqliteCheckpointer }) => sqliteCheckpointer(db, { storage }));
          saver.catch(() => (saver = undefined));
          return saver;
        };
        const commitLock = new SqliteCommitLock(c.file);
        this.closers.push(() => commitLock.close());
        handle = { reader, saver: load, durable: () => fsyncWal(c.file), commitLock, history: new SqliteHistory(db) };
      } else {
        // PostgreSQL drivers load only when a config names a postgres:// URL.
        const { postgresCheckpointer } = await import("../stores/checkpointers.js");
        const pool = await this.pool(c.url);
        const postgres = await postgresCheckpointer(pool, { storage });
        const { PostgresCheckpointReader } = await import("../stores/postgres-checkpoint-reader.js");
        const commitLock = new PostgresCommitLock(pool, "backendfs commit");
        this.closers.push(() => commitLock.close());
        handle = { saver: () => Promise.resolve(postgres), reader: new PostgresCheckpointReader(pool), commitLock, history: new PostgresHistory(pool) };
      }
    } catch (error) {
      throw wrapError(c, error);
    }
    this.savers.set(id, handle);
    return handle;
  }

  async store(c: Connection): Promise<BaseStore> {
    const id = describe(c);
    const known = this.stores.get(id);
    if (known) return known;
    let store: BaseStore;
    try {
      if (c.kind === "sqlite") {
        mkdirSync(dirname(c.file), { recursive: true });
        const { SqliteStore } = await import("../stores/sqlite-store.js");
        const sqliteStore = await whileBusy(() => new SqliteStore(c.file));
        this.closers.push(() => sqliteStore.close());
        store = sqliteStore;
      } else {
        const { PostgresStore } = await import("@langchain/langgraph-checkpoint-postgres/store");
        const postgresStore = new PostgresStore({ connectionOptions: c.url });
        // It makes a pool of its own, with no error listener: an idle client's error (a server
        // restart, a database dropped with FORCE) would be an uncaught exception. Ours have one.
        (postgresStore as unknown as { core?: { pool?: pg.Pool } }).core?.pool?.on("error", () => undefined);
        this.closers.push(() => postgresStore.stop());
        const { underMigrationLock } = await import("../stores/pg-transaction.js");
        await underMigrationLock(await this.pool(c.url), () => postgresStore.setup());
        store = postgresStore;
      }
    } catch (error) {
      throw wrapError(c, error);
    }
    this.stores.set(id, store);
    return store;
  }

  /** The node table (modes, owners, symlinks: node-table.ts) of one route, in the database `c`. */
  async nodeTable(c: Connection, scope: string): Promise<NodeTable> {
    try {
      if (c.kind === "sqlite") {
        const { SqliteNodeTable } = await import("../stores/node-table.js");
        const db = await whileBusy(() => this.sqliteDb(c.file));
        return await whileBusy(() => new SqliteNodeTable(db, scope));
      }
      const { PostgresNodeTable } = await import("../stores/postgres-node-table.js");
      return await PostgresNodeTable.open(await this.pool(c.url), scope);
    } catch (error) {
      throw wrapError(c, error);
    }
  }

  async close(): Promise<void> {
    const closers = this.closers.splice(0).reverse();
    this.savers.clear();
    this.stores.clear();
    for (const close of closers) {
      try {
        await close();
      } catch {
        // Closing is best effort: one failed close must not keep the others open.
      }
    }
  }

  private sqliteDb(file: string): Database.Database {
    const known = this.sqlite.get(file);
    if (known) return known;
    mkdirSync(dirname(file), { recursive: true });
    const db = new Database(file);
    try {
      // WAL and a busy timeout: other processes (another CLI, a mount, the agent) share the file.
      db.pragma("busy_timeout = 5000");
      db.pragma("journal_mode = WAL");
      // Explicit: SQLite leaves FULL on the connection that first turned the file to WAL and
      // NORMAL on later ones. NORMAL: a commit survives a crash of the process (the mount's
      // close); power-loss durability is fsync's job (`durable`: the WAL is fsync'd).
      db.pragma("synchronous = NORMAL");
    } catch (error) {
      db.close();
      throw error;
    }
    this.closers.push(() => db.close());
    this.sqlite.set(file, db);
    return db;
  }

  private async pool(url: string): Promise<pg.Pool> {
    const known = this.pools.get(url);
    if (known) return known;
    const { default: postgres } = await import("pg");
    const pool = new postgres.Pool({ connectionString: url, max: 4, connectionTimeoutMillis: 5000 });
    // An idle client's error (server restart) must not crash the process.
    pool.on("error", () => undefined);
    this.closers.push(() => pool.end());
    this.pools.set(url, pool);
    return pool;
  }
}

/**
 * Runs `open` again while SQLite answers SQLITE_BUSY, for up to 10 s. Processes opening one
 * fresh file at once (six `backendfs put` started together) race to turn it to WAL and create
 * its tables; some of those steps fail at once with "database is locked" instead of waiting
 * for the busy timeout.
 */
async function whileBusy<T>(open: () => T): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
    try {
      return open();
    } catch (error) {
      const code = (error as { code?: unknown }).code ?? ((error as { cause?: { code?: unknown } }).cause?.code);
      if ((code !== "SQLITE_BUSY" && code !== "SQLITE_LOCKED") || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** fsync of a WAL-mode database's `-wal` file: every transaction committed so far is on disk. */
async function fsyncWal(file: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(`${file}-wal`, "r");
  } catch (error) {
    // No WAL file: everything is in the database file, synced at its last checkpoint.
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
