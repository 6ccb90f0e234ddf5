/**
 * A lock that serializes the commits of backendfs processes sharing one checkpoint database.
 *
 * Checkpointers have no compare-and-swap. Two processes that read the latest checkpoint at
 * once and put on top of it fork the thread: the newer checkpoint wins and the other's files
 * are missing from it. A long-lived writer (a mount) notices and merges again
 * (unconfirmed-writes.ts), but a one-shot `backendfs put` has exited by then, so its write was
 * silently lost. Holding this lock from reading the latest checkpoint to writing the next one
 * makes backendfs writers take turns. Writers that do not take it (an agent's own graph steps)
 * are still handled by the re-merge.
 *
 * The lock is tried, not waited on inside the database: SQLite's busy wait blocks the event
 * loop, which a mount serving the kernel cannot afford. A process that dies releases it (the
 * kernel drops SQLite's file locks; PostgreSQL ends the session's advisory locks).
 */
import Database from "better-sqlite3";
import type pg from "pg";

export interface CommitLock {
  /** Runs `task` while no other holder of this lock (in any process) runs one. */
  hold<T>(task: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** How long a commit waits for another process's before it fails (and is retried later). */
const WAIT_LIMIT_MS = 30_000;
const FIRST_RETRY_MS = 1;
const LONGEST_RETRY_MS = 20;

/** The waiting, shared by both kinds: one holder per process at a time, polling the other processes' hold. */
abstract class PolledLock implements CommitLock {
  /** Holders in this process queue here: the lock is one connection's, which cannot take it twice. */
  private queue: Promise<unknown> = Promise.resolve();

  protected abstract tryAcquire(): Promise<boolean> | boolean;
  protected abstract release(): Promise<void> | void;
  protected abstract describe(): string;
  abstract close(): Promise<void>;

  hold<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(() => this.holding(task));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async holding<T>(task: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + WAIT_LIMIT_MS;
    for (let delay = FIRST_RETRY_MS; !(await this.tryAcquire()); delay = Math.min(delay * 2, LONGEST_RETRY_MS)) {
      if (Date.now() > deadline) throw new Error(`another process has held the commit lock of ${this.describe()} for over ${WAIT_LIMIT_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
    try {
      return await task();
    } finally {
      await this.release();
    }
  }
}

/**
 * SQLite: a write transaction on a small file beside the database (`<file>-lock`, empty: the
 * transaction writes nothing). Not on the database itself, whose write lock the saver and the
 * store need while the lock is held.
 */
export class SqliteCommitLock extends PolledLock {
  private db: Database.Database | undefined;

  constructor(private readonly file: string) {
    super();
  }

  protected tryAcquire(): boolean {
    this.db ??= new Database(`${this.file}-lock`, { timeout: 0 });
    try {
      this.db.exec("BEGIN IMMEDIATE");
      return true;
    } catch (error) {
      if ((error as { code?: unknown }).code === "SQLITE_BUSY") return false;
      throw error;
    }
  }

  protected release(): void {
    try {
      this.db?.exec("COMMIT");
    } catch {
      // Closing the connection drops its lock: never leave it held by a failed commit.
      this.db?.close();
      this.db = undefined;
    }
  }

  protected describe(): string {
    return this.file;
  }

  async close(): Promise<void> {
    this.db?.close();
    this.db = undefined;
  }
}

/** PostgreSQL: a session advisory lock, on a connection of its own (the task uses the pool). */
export class PostgresCommitLock extends PolledLock {
  private client: Promise<pg.Client> | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly key: string,
  ) {
    super();
  }

  private connection(): Promise<pg.Client> {
    this.client ??= (async () => {
      const { connectBeside } = await import("./pg-transaction.js");
      const client = await connectBeside(this.pool);
      // A dropped connection (server restart) is opened again at the next commit.
      client.on("error", () => (this.client = undefined));
      return client;
    })();
    this.client.catch(() => (this.client = undefined));
    return this.client;
  }

  protected async tryAcquire(): Promise<boolean> {
    const result = await (await this.connection()).query<{ locked: boolean }>("SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS locked", [this.key]);
    return result.rows[0]?.locked === true;
  }

  protected async release(): Promise<void> {
    const client = await this.connection();
    try {
      await client.query("SELECT pg_advisory_unlock(hashtextextended($1, 0))", [this.key]);
    } catch {
      // Ending the session releases its locks: never leave one held by a failed unlock.
      await this.close();
    }
  }

  protected describe(): string {
    return "the PostgreSQL database";
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) await (await client).end().catch(() => undefined);
  }
}
